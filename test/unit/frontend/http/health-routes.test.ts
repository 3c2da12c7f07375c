// /live, /ready, /metrics, and the metric names and help (promtool checks the same page in test/integration/frontend/metrics-promtool.test.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { metricsWithEverySeries, testApp, type TestApp } from '../../../support/frontend-fakes.js';

let t: TestApp;
afterEach(async () => {
  await t?.app.close();
});

describe('process endpoints', () => {
  it('GET /live answers 200 whatever readiness says', async () => {
    t = testApp({ options: { ready: () => ({ ready: false, reason: 'no workers' }) } });
    const res = await t.app.inject({ method: 'GET', url: '/live' });
    expect(res.statusCode).toBe(200);
  });

  it('GET /ready answers 200 when ready and 503 with the reason when not', async () => {
    let state: { ready: boolean; reason?: string } = { ready: true };
    t = testApp({ options: { ready: () => state } });
    expect((await t.app.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
    state = { ready: false, reason: 'no worker known yet' };
    const res = await t.app.inject({ method: 'GET', url: '/ready' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ status: 'not ready', reason: 'no worker known yet' });
  });

  it('GET /metrics serves the injected registry in its content type', async () => {
    t = testApp();
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe(t.registry.contentType);
    expect(res.body).toContain('# TYPE dynamo_frontend_model_rejection_total counter');
  });

  it('answers an unknown route with 404 in the one error shape, flat and under `error`', async () => {
    t = testApp();
    const res = await t.app.inject({ method: 'POST', url: '/v1/embeddings', payload: { input: 'x' } });
    expect(res.statusCode).toBe(404);
    const fields = { message: 'Route POST /v1/embeddings not found', type: 'Not Found', code: 404 };
    expect(res.json()).toEqual({ ...fields, error: fields });
  });
});

describe('frontend metrics', () => {
  it('name every series, all populated', async () => {
    t = testApp();
    const text = await metricsWithEverySeries(t);
    for (const name of [
      'model_rejection_total',
      'worker_rejections_total',
      'retries_total',
      'requests_total',
      'inflight_requests',
      'time_to_first_token_seconds_count',
      'inter_token_latency_seconds_count',
      'request_duration_seconds_count',
    ]) {
      expect(text).toMatch(new RegExp(`^dynamo_frontend_${name}\\{`, 'mu'));
    }
  });
});
