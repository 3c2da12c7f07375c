// The frontend's /metrics, with every series populated (a worker refusal, a retry, a 529), is
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
    const { code, output } = await promtoolCheckMetrics(text);
    expect(output).toBe('');
    expect(code).toBe(0);
  });
});
