// Route decisions as HTTP answers, and the attempt loop: retries after refusals before output, failures, InFlight accounting.
import { afterEach, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { encodeTokenizedInput } from '../../../../src/protocol/engine/tokenized-input.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { silentLogger } from '../../../../src/platform/log.js';
import { FrontendMetrics } from '../../../../src/frontend/frontend-metrics.js';
import { startGeneration } from '../../../../src/frontend/generate/attempt-loop.js';
import { FrontendError } from '../../../../src/frontend/generate/errors.js';
import {
  FakeRouter,
  fails,
  failsAfter,
  metricValue,
  OVERLOAD_DETAILS,
  sseEvents,
  streams,
  target,
  testApp,
  type TestApp,
} from '../../../support/frontend-fakes.js';

let t: TestApp;
afterEach(async () => {
  await t?.app.close();
});

const chat = (body: Record<string, unknown> = {}) =>
  t.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'm1', messages: [{ role: 'user', content: 'hi' }], ...body } });
const completion = (body: Record<string, unknown> = {}) =>
  t.app.inject({ method: 'POST', url: '/v1/completions', payload: { model: 'm1', prompt: 'hi', ...body } });
const rejections = (endpoint: string) => metricValue(t.registry, 'dynamo_frontend_model_rejection_total', { model: 'm1', endpoint });

const OVERLOADED = { message: 'Service temporarily overloaded', type: 'Overloaded', code: 529 };
const UNAVAILABLE = { message: 'Service temporarily unavailable', type: 'Service Unavailable', code: 503 };

describe('route decisions', () => {
  it('answer an unknown model with 404 "Model not found", counted under the "unknown" model label', async () => {
    t = testApp();
    const res = await chat({ model: 'nope' });
    expect(res.statusCode).toBe(404);
    const notFound = { message: 'Model not found', type: 'Not Found', code: 404 };
    expect(res.json()).toEqual({ ...notFound, error: notFound });
    expect(await metricValue(t.registry, 'dynamo_frontend_requests_total', { model: 'unknown', status: '404' })).toBe(1);
    expect(await metricValue(t.registry, 'dynamo_frontend_requests_total', { model: 'nope' })).toBeUndefined();
  });

  it('answer no_workers and unavailable with 503 "Service temporarily unavailable", without the internal reason', async () => {
    t = testApp();
    t.router.decide = () => ({ kind: 'no_workers' });
    const none = await chat();
    expect(none.statusCode).toBe(503);
    expect(none.json()).toEqual({ ...UNAVAILABLE, error: UNAVAILABLE });
    t.router.decide = () => ({ kind: 'unavailable', reason: 'worker 7 at 10.1.2.3:9000 unreachable' });
    const down = await completion();
    expect(down.statusCode).toBe(503);
    expect(down.json()).toEqual({ ...UNAVAILABLE, error: UNAVAILABLE });
    expect(down.headers['retry-after']).toBeUndefined();
  });

  it('answer overloaded with 529, Retry-After and the details, and count exactly one rejection per answer and endpoint', async () => {
    t = testApp({ options: { retryAfterS: 3 } });
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    for (let i = 0; i < 3; i++) {
      const res = await chat();
      expect(res.statusCode).toBe(529);
      expect(res.headers['retry-after']).toBe('3');
      expect(res.json()).toEqual({ ...OVERLOADED, details: OVERLOAD_DETAILS, error: OVERLOADED });
    }
    expect((await completion()).statusCode).toBe(529);
    expect(await rejections('chat_completions')).toBe(3);
    expect(await rejections('completions')).toBe(1);
    expect(t.workers.calls).toHaveLength(0);
  });

  it('use the configured overload status in both the status line and the body code', async () => {
    t = testApp({ options: { overloadStatus: 503 } });
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    const res = await chat();
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ message: 'Service temporarily overloaded', type: 'Overloaded', code: 503 });
    expect(await rejections('chat_completions')).toBe(1);
  });

  it('reject a streaming request before the stream starts: a real 529 status line with a JSON body', async () => {
    t = testApp();
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    const res = await chat({ stream: true });
    expect(res.statusCode).toBe(529);
    expect(res.headers['content-type']).toMatch(/^application\/json/u);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toEqual({ ...OVERLOADED, details: OVERLOAD_DETAILS, error: OVERLOADED });
  });
});

describe('the attempt loop', () => {
  it('retries on the next worker after RESOURCE_EXHAUSTED before any output, and reports the refusal to the router', async () => {
    t = testApp();
    t.router.targets = [target('1'), target('2')];
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'Server overloaded: worker at capacity'));
    t.workers.scripts.set('2', streams([1, 2]));
    const res = await chat();
    expect(res.statusCode).toBe(200);
    expect(t.workers.calls.map((c) => c.target.workerId)).toEqual(['1', '2']);
    expect(t.router.refused).toEqual([{ workerId: '1', kind: 'overloaded' }]);
    expect(t.router.routeCalls.map((c) => c.tried)).toEqual([[], ['1']]);
    expect(t.router.inflight.map((f) => f.ends)).toEqual([1, 1]);
    expect(t.router.inflight.map((f) => f.outputTokens)).toEqual([0, 2]);
    expect(await metricValue(t.registry, 'dynamo_frontend_worker_rejections_total', { model: 'm1', reason: 'overloaded' })).toBe(1);
    expect(await metricValue(t.registry, 'dynamo_frontend_retries_total', { model: 'm1' })).toBe(1);
  });

  it("sends every worker tried the prompt's admitted bytes themselves: one copy of the ids per request, never a copy per attempt nor the text again", async () => {
    t = testApp();
    t.router.targets = [target('1'), target('2')];
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'Server overloaded: worker at capacity'));
    expect((await completion({ prompt: 'a b c d' })).statusCode).toBe(200);
    const [first, second] = t.workers.calls.map((c) => c.request);
    expect(first!.tokenized_bytes).toBeInstanceOf(Uint8Array);
    expect(second!.tokenized_bytes).toBe(first!.tokenized_bytes);
    expect(first!.tokenized).toBeUndefined();
    expect(first!.text).toBeUndefined();
  });

  it('treats UNAVAILABLE before any output as an unreachable worker and retries', async () => {
    t = testApp();
    t.router.targets = [target('1'), target('2')];
    t.workers.scripts.set('1', fails(GrpcStatus.UNAVAILABLE, 'connect ECONNREFUSED'));
    expect((await completion({ stream: true })).statusCode).toBe(200);
    expect(t.router.refused).toEqual([{ workerId: '1', kind: 'unreachable' }]);
    expect(await metricValue(t.registry, 'dynamo_frontend_worker_rejections_total', { model: 'm1', reason: 'unreachable' })).toBe(1);
  });

  it('answers 529 with the details once every worker refused, counting one rejection and one retry', async () => {
    t = testApp();
    t.router.targets = [target('1'), target('2')];
    t.workers.defaultScript = fails(GrpcStatus.RESOURCE_EXHAUSTED);
    const res = await chat();
    expect(res.statusCode).toBe(529);
    expect(res.json()).toEqual({ ...OVERLOADED, details: { ...OVERLOAD_DETAILS, tried: 2 }, error: OVERLOADED });
    expect(t.router.refused.map((r) => r.workerId)).toEqual(['1', '2']);
    expect(t.router.inflight.map((f) => f.ends)).toEqual([1, 1]);
    expect(await rejections('chat_completions')).toBe(1);
    expect(await metricValue(t.registry, 'dynamo_frontend_retries_total', { model: 'm1' })).toBe(1);
    expect(await metricValue(t.registry, 'dynamo_frontend_worker_rejections_total', { model: 'm1', reason: 'overloaded' })).toBe(2);
  });

  it("takes the 529's Retry-After from the soonest pushback of the workers that refused, rounded up to whole seconds", async () => {
    t = testApp({ options: { retryAfterS: 9 } });
    t.router.targets = [target('1'), target('2'), target('3')];
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'full', { 'grpc-retry-pushback-ms': '4200' }));
    t.workers.scripts.set('2', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'full', { 'grpc-retry-pushback-ms': '2100' }));
    t.workers.scripts.set('3', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'full', { 'grpc-retry-pushback-ms': 'soon' }));
    const res = await chat();
    expect(res.statusCode).toBe(529);
    expect(res.headers['retry-after']).toBe('3');
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'full', { 'grpc-retry-pushback-ms': '0' }));
    expect((await chat()).headers['retry-after'], 'at least a second').toBe('1');
  });

  it("hands each refusal's pushback to the router, and takes Retry-After from a 529 the router answers from its leases", async () => {
    t = testApp({ options: { retryAfterS: 9 } });
    t.router.targets = [target('1')];
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED, 'full', { 'grpc-retry-pushback-ms': '1500' }));
    await chat();
    expect(t.router.refused).toEqual([{ workerId: '1', kind: 'overloaded', pushbackMs: 1500 }]);
    // No worker tried: the router's leases alone answer, with the soonest worker's pushback left.
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS, retryAfterMs: 2400 });
    const res = await chat();
    expect(res.statusCode).toBe(529);
    expect(res.headers['retry-after']).toBe('3');
  });

  it('falls back to --retry-after-s when no refusing worker sent a pushback', async () => {
    t = testApp({ options: { retryAfterS: 9 } });
    t.router.targets = [target('1')];
    t.workers.defaultScript = fails(GrpcStatus.RESOURCE_EXHAUSTED);
    expect((await chat()).headers['retry-after']).toBe('9');
  });

  it('does not retry other failures: 502 (504 for a deadline, 400 for an invalid request), never naming the worker address', async () => {
    t = testApp();
    t.router.targets = [target('1', '10.9.8.7:4242'), target('2')];
    const cases: [number, number, string][] = [
      [GrpcStatus.INTERNAL, 502, 'Bad Gateway'],
      [GrpcStatus.UNKNOWN, 502, 'Bad Gateway'],
      [GrpcStatus.DEADLINE_EXCEEDED, 504, 'Gateway Timeout'],
      [GrpcStatus.INVALID_ARGUMENT, 400, 'BadRequest'],
    ];
    for (const [code, status, type] of cases) {
      t.workers.scripts.set('1', fails(code, 'upstream 10.9.8.7:4242 said no'));
      const res = await chat();
      expect(res.statusCode).toBe(status);
      expect(res.json()).toMatchObject({ type, code: status });
      expect(res.body).not.toContain('10.9.8.7');
    }
    expect(t.workers.calls.every((c) => c.target.workerId === '1')).toBe(true);
    expect(t.router.refused).toEqual([]);
    expect(t.router.inflight.every((f) => f.ends === 1)).toBe(true);
  });

  it('never retries once output arrived: a streamed failure becomes one error event and the stream ends without [DONE]', async () => {
    t = testApp();
    t.router.targets = [target('1'), target('2')];
    t.workers.scripts.set('1', failsAfter([1, 2], GrpcStatus.RESOURCE_EXHAUSTED));
    const res = await chat({ stream: true });
    expect(res.statusCode).toBe(200);
    const events = sseEvents(res.body);
    expect(events.at(-1)).toEqual({ error: { message: 'the worker failed the request (RESOURCE_EXHAUSTED)', type: 'Bad Gateway', code: 502 } });
    expect(events).not.toContain('[DONE]');
    expect(events.filter((e) => (e as { error?: unknown }).error !== undefined)).toHaveLength(1);
    expect(t.workers.calls).toHaveLength(1);
    expect(t.router.refused).toEqual([]);
    expect(t.router.inflight).toMatchObject([{ outputTokens: 2, ends: 1 }]);
  });

  it('answers a failure after output with 502 when nothing was sent yet (non-streaming)', async () => {
    t = testApp();
    t.workers.defaultScript = failsAfter([1], GrpcStatus.INTERNAL);
    const res = await completion();
    expect(res.statusCode).toBe(502);
    const failed = { message: 'the worker failed the request (INTERNAL)', type: 'Bad Gateway', code: 502 };
    expect(res.json()).toEqual({ ...failed, error: failed });
    expect(t.router.inflight).toMatchObject([{ ends: 1 }]);
  });

  it('treats a worker finish_reason "abort" as a failed request', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1], 'abort');
    const res = await completion();
    expect(res.statusCode).toBe(502);
    expect(res.json<{ message: string }>().message).toBe('the worker aborted the request');
  });

  it('answers 503 instead of looping when the router offers a worker this request already tried', async () => {
    t = testApp();
    t.router.decide = () => ({ kind: 'route', target: target('1') });
    t.workers.defaultScript = fails(GrpcStatus.RESOURCE_EXHAUSTED);
    const res = await chat();
    expect(res.statusCode).toBe(503);
    expect(t.workers.calls).toHaveLength(1);
  });

  it('sends the route target dp rank and ends InFlight exactly once on success', async () => {
    t = testApp();
    t.router.targets = [target('5', '127.0.0.1:1', 3)];
    await chat({ stream: true });
    expect(t.workers.calls[0]!.target.dpRank).toBe(3);
    expect(t.router.inflight).toMatchObject([{ promptTokens: 3, outputTokens: 3, ends: 1 }]);
  });

  it('keeps the error of a worker call that cannot start as the cause of its internal FrontendError', async () => {
    const broken = new Error('channel closed');
    const workers = {
      generate: () => {
        throw broken;
      },
      close: () => {},
    };
    const record = new FrontendMetrics(new Registry()).startRequest('completions');
    const request = { requestId: 'r1', model: 'm1', prompt: { tokens: 1, tokenized: encodeTokenizedInput([1], 64)! }, priority: 0 };
    const started = startGeneration({ router: new FakeRouter(), workers, logger: silentLogger }, request, record, new AbortController().signal);
    const error = await started.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(FrontendError);
    expect(error).toMatchObject({ code: 'internal', message: 'cannot start the worker call: channel closed', cause: broken });
  });
});
