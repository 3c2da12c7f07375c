// The frontend's request series on a fresh registry per test, timed by a clock the test moves.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CLIENT_CLOSED_STATUS, FrontendMetrics, UNKNOWN_MODEL_LABEL } from '../../../src/frontend/frontend-metrics.js';
import { metricValue } from '../../support/frontend-fakes.js';

function setup() {
  const registry = new Registry();
  let nowMs = 1000;
  const metrics = new FrontendMetrics(registry, () => nowMs);
  const value = (name: string, labels: Record<string, string> = {}) => metricValue(registry, name, labels);
  /** Sum and count of a histogram series. */
  const histogram = async (name: string, labels: Record<string, string>) => {
    const { values } = await registry.getSingleMetric(name)!.get();
    const pick = (suffix: string) =>
      values.find((v) => (v as { metricName?: string }).metricName === name + suffix && Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
    return { sum: pick('_sum'), count: pick('_count') };
  };
  return { registry, metrics, value, histogram, advance: (ms: number) => (nowMs += ms) };
}

describe('FrontendMetrics', () => {
  it('counts a finished request once, under its model, endpoint and status, with its duration', async () => {
    const t = setup();
    const record = t.metrics.startRequest('chat_completions');
    record.setModel('m');
    t.advance(250);
    record.finish(200);
    record.finish(500);
    expect(await t.value('dynamo_frontend_requests_total', { model: 'm', endpoint: 'chat_completions', status: '200' })).toBe(1);
    expect(await t.value('dynamo_frontend_requests_total', { status: '500' })).toBeUndefined();
    expect(await t.histogram('dynamo_frontend_request_duration_seconds', { model: 'm', endpoint: 'chat_completions' })).toEqual({ sum: 0.25, count: 1 });
  });

  it('keeps a request in flight from setModel to finish, and one that never got a model never in flight', async () => {
    const t = setup();
    const record = t.metrics.startRequest('completions');
    record.setModel('m');
    record.setModel('other');
    expect(record.model).toBe('m');
    expect(await t.value('dynamo_frontend_inflight_requests', { model: 'm' })).toBe(1);
    record.finish(200);
    expect(await t.value('dynamo_frontend_inflight_requests', { model: 'm' })).toBe(0);

    const unparsed = t.metrics.startRequest('completions');
    unparsed.finish(400);
    unparsed.setModel('late');
    expect(unparsed.model).toBe(UNKNOWN_MODEL_LABEL);
    expect(await t.value('dynamo_frontend_requests_total', { model: UNKNOWN_MODEL_LABEL, status: '400' })).toBe(1);
    expect(await t.value('dynamo_frontend_inflight_requests', { model: 'late' })).toBeUndefined();
  });

  it('times the first tokens from the start (TTFT) and spreads a later message over its tokens (ITL)', async () => {
    const t = setup();
    const record = t.metrics.startRequest('completions');
    record.setModel('m');
    t.advance(100);
    record.tokens(0);
    record.tokens(2);
    t.advance(40);
    record.tokens(4);
    expect(await t.histogram('dynamo_frontend_time_to_first_token_seconds', { model: 'm' })).toEqual({ sum: 0.1, count: 1 });
    const itl = await t.histogram('dynamo_frontend_inter_token_latency_seconds', { model: 'm' });
    expect(itl.count).toBe(4);
    expect(itl.sum).toBeCloseTo(0.04, 10);
  });

  it('counts worker refusals by reason, retries, and overload rejections by endpoint', async () => {
    const t = setup();
    const record = t.metrics.startRequest('chat_completions');
    record.setModel('m');
    record.workerRefused('overloaded');
    record.workerRefused('overloaded');
    record.workerRefused('unreachable');
    record.retried();
    record.rejected();
    expect(await t.value('dynamo_frontend_worker_rejections_total', { model: 'm', reason: 'overloaded' })).toBe(2);
    expect(await t.value('dynamo_frontend_worker_rejections_total', { model: 'm', reason: 'unreachable' })).toBe(1);
    expect(await t.value('dynamo_frontend_retries_total', { model: 'm' })).toBe(1);
    expect(await t.value('dynamo_frontend_model_rejection_total', { model: 'm', endpoint: 'chat_completions' })).toBe(1);
  });

  it('times each overload answer from the request reaching the frontend, as a summary with p50, p90 and p99', async () => {
    const t = setup();
    for (const ms of [1, 2, 3, 40]) {
      const record = t.metrics.startRequest('completions');
      record.setModel('m');
      t.advance(ms);
      record.rejected();
    }
    const answered = t.metrics.startRequest('completions');
    t.advance(500);
    answered.finish(200);
    expect(await t.histogram('dynamo_frontend_time_to_rejection_seconds', { model: 'm', endpoint: 'completions' })).toEqual({ sum: 0.046, count: 4 });
    const { values } = await t.registry.getSingleMetric('dynamo_frontend_time_to_rejection_seconds')!.get();
    const p99 = values.find((v) => v.labels['quantile'] === 0.99)!.value;
    expect(p99).toBeGreaterThan(0.003);
    expect(p99).toBeLessThanOrEqual(0.04);
  });

  it("records a client that left with nginx's 499", () => {
    expect(CLIENT_CLOSED_STATUS).toBe(499);
  });
});
