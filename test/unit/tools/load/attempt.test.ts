// One gRPC Generate attempt of the load client, against a fake client whose call is an
// EventEmitter and a hand-driven performance.now(): what it sends, how it times tokens, and the
// one outcome it reports for each way a call ends.
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GenerateRequestMessage, GenerateResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { startAttempt } from '../../../../src/tools/load/attempt.js';
import { LoadRecorder } from '../../../../src/tools/load/stats.js';

class FakeCall extends EventEmitter {
  cancelled = 0;
  cancel(): void {
    this.cancelled += 1;
  }
  data(message: GenerateResponseMessage): void {
    this.emit('data', message);
  }
  status(code: grpc.status, metadata = new grpc.Metadata()): void {
    if (code !== grpc.status.OK) this.emit('error', Object.assign(new Error('failed'), { code }));
    this.emit('status', { code, details: '', metadata });
  }
}

function fakeClient() {
  const calls: { request: GenerateRequestMessage; options: grpc.CallOptions; metadata: grpc.Metadata | undefined; call: FakeCall; self: unknown }[] = [];
  const client = {
    Generate(this: unknown, request: GenerateRequestMessage, ...rest: [grpc.CallOptions] | [grpc.Metadata, grpc.CallOptions]) {
      const call = new FakeCall();
      const [metadata, options] = rest.length === 2 ? rest : [undefined, rest[0]];
      calls.push({ request, options, metadata, call, self: this });
      return call;
    },
  };
  return { client: client as unknown as grpc.Client, calls };
}

let clock = 0;
afterEach(() => {
  vi.restoreAllMocks();
});

function setup(deadlineMs?: number, metadata?: Record<string, string>) {
  clock = 1000;
  vi.spyOn(performance, 'now').mockImplementation(() => clock);
  const { client, calls } = fakeClient();
  const recorder = new LoadRecorder();
  const request: GenerateRequestMessage = { request_id: 'load-0-0', tokenized: { original_text: '', input_ids: [1, 2] }, stream: true };
  const attempt = startAttempt(client, request, deadlineMs, recorder, metadata);
  return { attempt, call: calls[0]!.call, calls, recorder, request, client };
}

const chunk = (n: number): GenerateResponseMessage => ({
  chunk: { token_ids: Array.from({ length: n }, (_, i) => i + 1), prompt_tokens: 2, completion_tokens: n, cached_tokens: 0 },
});
const complete = (n: number): GenerateResponseMessage => ({
  complete: { output_ids: Array.from({ length: n }, (_, i) => i + 1), finish_reason: 'length', prompt_tokens: 2, completion_tokens: n, cached_tokens: 0 },
});

describe('startAttempt request', () => {
  it('calls Generate on the client with the request and no deadline when none is given', () => {
    const { calls, request, client } = setup();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.request).toBe(request);
    expect(calls[0]!.options).toEqual({});
    expect(calls[0]!.self).toBe(client);
  });

  it('sets the deadline that many ms from now', () => {
    vi.spyOn(Date, 'now').mockReturnValue(1_700_000_000_000);
    const { calls } = setup(2500);
    expect(calls[0]!.options).toEqual({ deadline: 1_700_000_002_500 });
  });

  it('sends the class metadata when given, and no metadata when empty', () => {
    const { calls } = setup(undefined, { 'x-request-priority': '-3', 'x-tenant-id': 'acme' });
    expect(calls[0]!.metadata?.getMap()).toEqual({ 'x-request-priority': '-3', 'x-tenant-id': 'acme' });
    expect(calls[0]!.options).toEqual({});
    expect(setup(undefined, {}).calls[0]!.metadata).toBeUndefined();
    expect(setup().calls[0]!.metadata).toBeUndefined();
  });

  it('cancels the call when cancelled', () => {
    const { attempt, call } = setup();
    attempt.cancel();
    expect(call.cancelled).toBe(1);
  });
});

describe('startAttempt outcome', () => {
  it('is completed when the call ends OK after a complete message, with its token timing (one token: no gap)', async () => {
    const { attempt, call } = setup();
    call.data(chunk(1));
    call.data(complete(1));
    call.status(grpc.status.OK);
    const done = await attempt.done;
    expect(done).toMatchObject({ outcome: { kind: 'completed', timing: { meanItlMs: undefined } }, pushback: undefined });
    expect(done.outcome.kind === 'completed' && done.outcome.timing!.ttftMs).toBeGreaterThanOrEqual(0);
  });

  it('is NO_COMPLETE when the call ends OK without a complete message', async () => {
    const { attempt, call } = setup();
    call.data(chunk(3));
    call.status(grpc.status.OK);
    await expect(attempt.done).resolves.toEqual({ outcome: { kind: 'bad-response', label: 'NO_COMPLETE' }, pushback: undefined });
  });

  it('is the failure status with the pushback trailer, even after a complete', async () => {
    const { attempt, call } = setup();
    call.data(complete(2));
    const trailers = new grpc.Metadata();
    trailers.set('grpc-retry-pushback-ms', '120');
    call.status(grpc.status.RESOURCE_EXHAUSTED, trailers);
    await expect(attempt.done).resolves.toEqual({ outcome: { kind: 'failed', code: GrpcStatus.RESOURCE_EXHAUSTED }, pushback: 120 });
  });

  it("reads a do-not-retry pushback as 'stop', and no trailer as undefined", async () => {
    const stop = setup();
    const trailers = new grpc.Metadata();
    trailers.set('grpc-retry-pushback-ms', '-1');
    stop.call.status(grpc.status.RESOURCE_EXHAUSTED, trailers);
    expect((await stop.attempt.done).pushback).toBe('stop');
    const none = setup();
    none.call.status(grpc.status.UNAVAILABLE);
    expect(await none.attempt.done).toEqual({ outcome: { kind: 'failed', code: GrpcStatus.UNAVAILABLE }, pushback: undefined });
  });

  it("survives the call's 'error' event (the status carries the outcome)", async () => {
    const { attempt, call } = setup();
    expect(() => call.status(grpc.status.DEADLINE_EXCEEDED)).not.toThrow();
    expect((await attempt.done).outcome).toEqual({ kind: 'failed', code: GrpcStatus.DEADLINE_EXCEEDED });
  });
});

describe('startAttempt token timing', () => {
  it('takes TTFT at the first chunk with tokens, skipping empty ones, and one ITL sample per token after that', () => {
    const { call, recorder } = setup();
    clock = 1005;
    call.data(chunk(0));
    clock = 1040;
    call.data(chunk(1)); // first token: TTFT 40
    clock = 1070;
    call.data(chunk(3)); // 30 ms over 3 tokens: three samples of 10
    clock = 1090;
    call.data(chunk(1)); // 20
    const s = recorder.summary('h:1', 1000);
    expect(s.ttft_ms).toEqual({ p50: 40, p90: 40, p99: 40 });
    expect(s.itl_ms).toEqual({ p50: 10, p90: 20, p99: 20 });
    expect(s.output_tokens).toBe(5);
  });

  it('does not count again the tokens a streamed complete repeats, but counts the ones it adds', () => {
    const { call, recorder } = setup();
    call.data(chunk(2));
    call.data(chunk(2));
    call.data(complete(2)); // vLLM repeats the last delta: nothing new
    expect(recorder.outputTokens).toBe(4);
    const more = setup();
    more.call.data(chunk(2));
    more.call.data(complete(5)); // three tokens never streamed
    expect(more.recorder.outputTokens).toBe(5);
  });

  it('counts every token of a non-streamed complete, timing it as the first token', () => {
    const { call, recorder } = setup();
    clock = 1250;
    call.data(complete(7));
    const s = recorder.summary('h:1', 1000);
    expect(s.output_tokens).toBe(7);
    expect(s.ttft_ms.p50).toBe(250);
    expect(s.itl_ms.p50).toBeNull();
  });

  it('records nothing for a call that fails before any token', async () => {
    const { attempt, call, recorder } = setup();
    call.status(grpc.status.UNAVAILABLE);
    await attempt.done;
    expect(recorder.outputTokens).toBe(0);
    expect(recorder.summary('h:1', 1000).ttft_ms.p50).toBeNull();
  });
});
