// Generation over a scripted call: token events and the finish, the in-flight count ended once, and every failure typed.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { GenerateResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { FrontendMetrics } from '../../../../src/frontend/frontend-metrics.js';
import { ClientGoneError, FrontendError } from '../../../../src/frontend/generate/errors.js';
import { Generation } from '../../../../src/frontend/generate/generation.js';
import { WorkerStream } from '../../../../src/frontend/generate/worker-stream.js';
import { FakeCall, target } from '../../../support/frontend-fakes.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const chunk = (...ids: number[]): GenerateResponseMessage => ({ chunk: { token_ids: ids, prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0 } });
const complete = (finish_reason: string, ...output_ids: number[]): GenerateResponseMessage => ({
  complete: { output_ids, finish_reason, prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0 },
});
const OK = { code: GrpcStatus.OK, details: '' };

function setup() {
  const call = new FakeCall(target('1'), { request_id: 'r', stream: true });
  const registry = new Registry();
  const record = new FrontendMetrics(registry, () => 0).startRequest('completions');
  record.setModel('m');
  const counts = { outputTokens: [] as number[], ends: 0, closes: 0 };
  const abort = new AbortController();
  const logger = recordingLogger();
  const generation = new Generation({
    stream: new WorkerStream(call),
    inflight: { outputTokens: (delta) => counts.outputTokens.push(delta), end: () => counts.ends++ },
    record,
    signal: abort.signal,
    onClose: () => counts.closes++,
    address: '10.9.8.7:50051',
    workerId: '1',
    promptTokens: 4,
    logger,
  });
  return { call, generation, counts, abort, logger, registry };
}

/** How many first tokens the request's record timed. */
async function ttftCount(registry: Registry): Promise<number | undefined> {
  const { values } = await registry.getSingleMetric('dynamo_frontend_time_to_first_token_seconds')!.get();
  return values.find((v) => (v as { metricName?: string }).metricName === 'dynamo_frontend_time_to_first_token_seconds_count')?.value;
}

/** The error next() rejects with. */
const failure = (generation: Generation): Promise<unknown> =>
  generation.next().then(
    () => undefined,
    (error: unknown) => error,
  );

describe('Generation', () => {
  it('gives each chunk as tokens, counting them for the router and the metrics, then done with the finish reason', async () => {
    const t = setup();
    t.call.send(chunk(1, 2));
    t.call.send(chunk(3));
    t.call.send(complete('length', 3));
    expect(await t.generation.next()).toEqual({ kind: 'tokens', ids: [1, 2] });
    expect(await t.generation.next()).toEqual({ kind: 'tokens', ids: [3] });
    expect(await t.generation.next()).toEqual({ kind: 'done', finishReason: 'length' });
    expect([t.generation.promptTokens, t.generation.completionTokens]).toEqual([4, 3]);
    expect(t.counts.outputTokens).toEqual([2, 1]);
    expect(await ttftCount(t.registry)).toBe(1);
    expect([t.counts.ends, t.counts.closes]).toEqual([1, 1]);
  });

  it('ends a finished call by letting it end, not by cancelling it', async () => {
    const t = setup();
    t.call.send(complete('stop'));
    expect(await t.generation.next()).toEqual({ kind: 'done', finishReason: 'stop' });
    expect(t.call.cancelled).toBe(false);
    t.call.end(OK);
    t.generation.close();
    expect([t.counts.ends, t.counts.closes]).toEqual([1, 1]);
  });

  it('gives only the ids of the complete message beyond those streamed, then done', async () => {
    const t = setup();
    t.call.send(chunk(1));
    t.call.send(complete('stop', 1, 2, 3));
    expect(await t.generation.next()).toEqual({ kind: 'tokens', ids: [1] });
    expect(await t.generation.next()).toEqual({ kind: 'tokens', ids: [2, 3] });
    expect(await t.generation.next()).toEqual({ kind: 'done', finishReason: 'stop' });
    expect(t.generation.completionTokens).toBe(3);
  });

  it('skips empty chunks and messages that are neither chunk nor complete', async () => {
    const t = setup();
    t.call.send(chunk());
    t.call.send({});
    t.call.send(chunk(5));
    expect(await t.generation.next()).toEqual({ kind: 'tokens', ids: [5] });
  });

  it('maps finish reasons: length stays, abort or empty is a failure, anything else is stop', async () => {
    for (const [reason, expected] of [
      ['eos', 'stop'],
      ['stop', 'stop'],
      ['length', 'length'],
    ] as const) {
      const t = setup();
      t.call.send(complete(reason));
      expect(await t.generation.next()).toEqual({ kind: 'done', finishReason: expected });
    }
    for (const reason of ['abort', '']) {
      const t = setup();
      t.call.send(complete(reason));
      const error = await failure(t.generation);
      expect(error).toBeInstanceOf(FrontendError);
      expect(error).toMatchObject({ code: 'worker_failed', message: 'the worker aborted the request' });
      expect([t.call.cancelled, t.counts.ends]).toEqual([true, 1]);
    }
  });

  it('turns a call that ends before its complete message into the worker-status error, logged with the address', async () => {
    const t = setup();
    t.call.send(chunk(1));
    t.call.end({ code: GrpcStatus.UNAVAILABLE, details: 'connection reset' });
    await t.generation.next();
    const error = await failure(t.generation);
    expect(error).toMatchObject({ code: 'worker_failed', message: 'the worker failed the request (UNAVAILABLE)' });
    expect(t.logger.find('worker failed a request after output started', 'warn')).toMatchObject([
      { fields: { worker_id: '1', address: '10.9.8.7:50051', code: GrpcStatus.UNAVAILABLE, output_tokens: 1 } },
    ]);
    expect([t.counts.ends, t.counts.closes]).toEqual([1, 1]);
  });

  it('throws ClientGoneError once the client left, cancelling the call', async () => {
    const t = setup();
    t.abort.abort();
    t.call.send(chunk(1));
    expect(await failure(t.generation)).toBeInstanceOf(ClientGoneError);
    expect([t.call.cancelled, t.counts.ends]).toEqual([true, 1]);
  });

  it('close cancels an open call and ends the count once, however often it is called; reading after it is a bug', async () => {
    const t = setup();
    t.generation.close();
    t.generation.close();
    expect([t.call.cancelled, t.counts.ends, t.counts.closes]).toEqual([true, 1, 1]);
    expect(await failure(t.generation)).toMatchObject({ code: 'internal', message: 'generation read after it was closed' });
  });
});
