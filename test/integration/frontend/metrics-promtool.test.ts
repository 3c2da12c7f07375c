// The frontend's /metrics, with every series populated (a worker refusal, a retry, a 529, tenants and classes), is
// exposition that promtool accepts.
import { afterEach, describe, expect, it } from 'vitest';
import { metricsWithEverySeries, testApp, type TestApp } from '../../support/frontend-fakes.js';
import { promtoolCheckMetrics } from '../../support/promtool.js';

let t: TestApp | undefined;
afterEach(async () => {
  await t?.app.close();
  t = undefined;
});

describe('frontend /metrics', () => {
  it('passes promtool check metrics with every series populated', async () => {
    t = testApp();
    const text = await metricsWithEverySeries(t);
    expect(text).toContain('dynamo_frontend_worker_rejections_total{');
    expect(text).toContain('dynamo_frontend_priority_class_requests_total{priority_class="default",outcome="served"} 1');
    expect(text).toContain('dynamo_frontend_tenant_requests_total{tenant="team-b",outcome="overloaded"} 1');
    expect(text).toContain('dynamo_frontend_tenant_inflight_requests{tenant="team-a"} 0');
    const { code, output } = await promtoolCheckMetrics(text);
    expect(output).toBe('');
    expect(code).toBe(0);
  });
});
