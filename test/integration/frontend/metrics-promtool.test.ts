// The frontend's /metrics, with every series populated (a worker refusal, a retry, a 529), is
// exposition that promtool accepts.
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../src/protocol/grpc/status.js';
import { fails, OVERLOAD_DETAILS, target, testApp, type TestApp } from '../../support/frontend-fakes.js';
import { promtoolCheckMetrics } from '../../support/promtool.js';

let t: TestApp | undefined;
afterEach(async () => {
  await t?.app.close();
  t = undefined;
});

describe('frontend /metrics', () => {
  it('passes promtool check metrics with every series populated', async () => {
    t = testApp();
    t.router.targets = [target('1'), target('2')];
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED));
    await t.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'm1', messages: [{ role: 'user', content: 'x' }] } });
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    await t.app.inject({ method: 'POST', url: '/v1/completions', payload: { model: 'm1', prompt: 'x' } });
    const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toContain('dynamo_frontend_worker_rejections_total{');
    const { code, output } = await promtoolCheckMetrics(text);
    expect(output).toBe('');
    expect(code).toBe(0);
  });
});
