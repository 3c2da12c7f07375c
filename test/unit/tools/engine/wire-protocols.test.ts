/**
 * The simulated engine's protocol adapters with a fake host and fake calls: each protocol's
 * request as the core's, and the core's output (chunks, then a complete repeating the last
 * chunk when streamed) written in that protocol's layout, the last chunk merged with the finish
 * where the protocol carries both in one message.
 */
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { GenerateRequestMessage, GenerateResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import type { GenerateSink } from '../../../../src/tools/engine/engine-core.js';
import { protocolServices, type ProtocolHost } from '../../../../src/tools/engine/wire-protocols.js';
import type { EngineProtocol, SglangOutput } from '../../../../src/tools/engine/options.js';

interface Run {
  request: GenerateRequestMessage | undefined;
  sink: GenerateSink | undefined;
  written: unknown[];
  ended: boolean;
  unary: unknown;
}

function host(sglangOutput: SglangOutput, run: Run): ProtocolHost {
  return {
    sglangOutput,
    generate: (_call, request, sink) => {
      run.request = request;
      run.sink = sink;
    },
    abort: () => {},
    modelInfo: () => ({}),
    serverInfo: () => ({}),
    getLoads: () => {},
    loadsOf: () => [],
    capacity: { modelName: 'm', dataParallelSize: 2, numGpuBlocks: 100, blockSize: 16, maxNumSeqs: 4, maxNumBatchedTokens: 512, maxModelLen: 1600 },
    healthy: true,
  };
}

/** Calls `method` of `protocol` with `request`; the returned run records what the handler wrote. */
function call(protocol: EngineProtocol, method: string, request: object, sglangOutput: SglangOutput = 'cumulative'): Run {
  const run: Run = { request: undefined, sink: undefined, written: [], ended: false, unary: undefined };
  const services = protocolServices(protocol, host(sglangOutput, run)).services;
  const handler = services.map((s) => s.handlers[method]).find((h) => h !== undefined) as unknown as (
    call: unknown,
    callback?: grpc.sendUnaryData<unknown>,
  ) => void;
  const fakeCall = { request, write: (m: unknown) => run.written.push(m), end: () => (run.ended = true), emit: () => true };
  handler(fakeCall, (_error, value) => {
    run.unary = value;
    run.ended = true;
  });
  return run;
}

const chunk = (ids: number[]): GenerateResponseMessage => ({ chunk: { token_ids: ids, prompt_tokens: 5, completion_tokens: ids.length, cached_tokens: 0 } });
const complete = (ids: number[], reason = 'length'): GenerateResponseMessage => ({
  complete: { output_ids: ids, finish_reason: reason, prompt_tokens: 5, completion_tokens: ids.length, cached_tokens: 0 },
});
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('vllm-native', () => {
  it('maps the request: token ids, max_new_tokens (0 = unset), streaming by RPC; the rank comes from metadata only', () => {
    const run = call('vllm-native', 'GenerateStream', { request_id: 'r1', token_ids: { ids: [1, 2, 3] }, stopping: { max_new_tokens: 0 } });
    expect(run.request).toEqual({
      request_id: 'r1',
      tokenized: { input_ids: [1, 2, 3] },
      sampling_params: { max_tokens: null },
      stream: true,
      data_parallel_rank: null,
    });
    expect(call('vllm-native', 'Generate', { text: 'a b', stopping: { max_new_tokens: 7 } }).request).toMatchObject({
      text: 'a b',
      sampling_params: { max_tokens: 7 },
      stream: false,
    });
  });

  it('streams prompt_info first, then deltas, the last one merged with finish_info (the total)', async () => {
    const run = call('vllm-native', 'GenerateStream', { request_id: 'r', token_ids: { ids: [1] }, response: { output_token_ids: true } });
    run.sink!.write(chunk([7, 8]));
    await tick();
    run.sink!.write(chunk([9]));
    run.sink!.write(complete([9]));
    run.sink!.end();
    expect(run.written).toEqual([
      { prompt_info: { num_prompt_tokens: 5 } },
      { outputs: { index: 0, num_tokens: 2, token_ids: [7, 8] } },
      { outputs: { index: 0, num_tokens: 1, token_ids: [9], finish_info: { num_output_tokens: 3, finish_reason: 'LENGTH' } } },
    ]);
    expect(run.ended).toBe(true);
  });

  it('leaves token_ids out unless asked, and answers the unary Generate with one whole response', () => {
    const streamed = call('vllm-native', 'GenerateStream', { token_ids: { ids: [1] } });
    streamed.sink!.write(chunk([7]));
    streamed.sink!.write(complete([7], 'abort'));
    expect(streamed.written[1]).toEqual({
      outputs: { index: 0, num_tokens: 1, token_ids: [], finish_info: { num_output_tokens: 1, finish_reason: 'ABORTED' } },
    });
    const unary = call('vllm-native', 'Generate', { token_ids: { ids: [1] }, response: { output_token_ids: true } });
    unary.sink!.write(complete([4, 5, 6], 'stop'));
    unary.sink!.end();
    expect(unary.unary).toEqual({
      prompt_info: { num_prompt_tokens: 5 },
      outputs: { index: 0, num_tokens: 3, token_ids: [4, 5, 6], finish_info: { num_output_tokens: 3, finish_reason: 'STOP' } },
    });
  });
});

describe('sglang-native', () => {
  it('maps the request: rid, max_new_tokens, routed_dp_rank; stream absent means one message', () => {
    const run = call('sglang-native', 'Generate', { input_ids: [1, 2], sampling_params: { max_new_tokens: 9 }, rid: 'x', routed_dp_rank: 1 });
    expect(run.request).toEqual({
      request_id: 'x',
      tokenized: { input_ids: [1, 2] },
      sampling_params: { max_tokens: 9, n: 1 },
      stream: false,
      data_parallel_rank: 1,
    });
  });

  it.each([
    [
      'cumulative',
      [
        [7, 8],
        [7, 8, 9],
      ],
    ],
    ['incremental', [[7, 8], [9]]],
  ] as const)('%s output_ids, finished on the last message with the finish reason as JSON', async (form, want) => {
    const run = call('sglang-native', 'Generate', { input_ids: [1], stream: true }, form);
    run.sink!.write(chunk([7, 8]));
    await tick();
    run.sink!.write(chunk([9]));
    run.sink!.write(complete([9]));
    run.sink!.end();
    const messages = run.written as { output_ids: number[]; finished: boolean; meta_info: Record<string, string> }[];
    expect(messages.map((m) => m.output_ids)).toEqual(want);
    expect(messages.map((m) => m.finished)).toEqual([false, true]);
    expect(JSON.parse(messages[1]!.meta_info['finish_reason']!)).toEqual({ type: 'length', length: 3 });
    expect(messages[1]!.meta_info['completion_tokens']).toBe('3');
  });
});

describe('vllm-legacy', () => {
  it('writes request_id with each message, completion_tokens as the running total, and every id in the complete', () => {
    const run = call('vllm-legacy', 'Generate', { request_id: 'q', tokenized: { input_ids: [1] }, stream: true });
    run.sink!.write(chunk([7, 8]));
    run.sink!.write(chunk([9]));
    run.sink!.write(complete([9]));
    expect(run.written).toEqual([
      { request_id: 'q', chunk: expect.objectContaining({ token_ids: [7, 8], completion_tokens: 2 }) },
      { request_id: 'q', chunk: expect.objectContaining({ token_ids: [9], completion_tokens: 3 }) },
      { request_id: 'q', complete: expect.objectContaining({ output_ids: [7, 8, 9], completion_tokens: 3 }) },
    ]);
  });
});
