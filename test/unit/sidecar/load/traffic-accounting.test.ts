import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { TrafficAccounting } from '../../../../src/sidecar/load/traffic-accounting.js';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import type { GenerateWire } from '../../../../src/protocol/engine/generate-wire.js';
import { bytes, generateRequestBytes, msg, num, packed, tokenIds } from '../../../support/proto-bytes.js';

const vllm = loadSync(join(PROTO_DIR, 'vllm/vllm_engine.proto'), { keepCase: true, oneofs: true });
const type = (name: string): MessageTypeDefinition<object, object> => vllm[`vllm.grpc.engine.${name}`] as MessageTypeDefinition<object, object>;

/** A gRPC length-prefixed frame of one message. */
function frame(name: string, value: object): Buffer {
  return frameMessage(type(name).serialize(value));
}

const GENERATE = { ':path': '/vllm.grpc.engine.VllmEngine/Generate' };
const request = (promptTokens: number, rank?: number): Buffer =>
  frame('GenerateRequest', {
    request_id: 'r',
    tokenized: { input_ids: Array.from({ length: promptTokens }, (_, i) => i + 1) },
    sampling_params: { max_tokens: 10 },
    ...(rank === undefined ? {} : { data_parallel_rank: rank }),
  });
const chunk = (tokens: number, completion: number): Buffer =>
  frame('GenerateResponse', { chunk: { token_ids: Array.from({ length: tokens }, () => 7), completion_tokens: completion } });

function setup(wire: GenerateWire = 'vllm'): { tracker: LoadTracker; accounting: TrafficAccounting } {
  const tracker = new LoadTracker({ workerId: 1, dataParallelSize: 2, kvBlockSize: 16, trackOutputBlocks: true });
  return { tracker, accounting: new TrafficAccounting(tracker, wire) };
}

describe('TrafficAccounting', () => {
  it('taps only Generate calls', () => {
    const { accounting } = setup();
    expect(accounting.tap({ ':path': '/vllm.grpc.engine.VllmEngine/HealthCheck' })).toBeUndefined();
    expect(accounting.tap({ ':path': '/any.Service/Method' })).toBeUndefined();
    expect(accounting.tap(GENERATE)).toBeDefined();
    // The other engine's Generate is not this engine's: never guessed.
    expect(accounting.tap({ ':path': '/sglang.grpc.scheduler.SglangScheduler/Generate' })).toBeUndefined();
    expect(setup('sglang').accounting.tap({ ':path': '/sglang.grpc.scheduler.SglangScheduler/Generate' })).toBeDefined();
    expect(setup('sglang').accounting.tap(GENERATE)).toBeUndefined();
  });

  it('counts prompt tokens as prefill until the first output, then output in decode blocks, and nothing after the end', () => {
    const { tracker, accounting } = setup();
    const tap = accounting.tap(GENERATE)!;
    const whole = request(40);
    // The request may arrive split across DATA frames.
    tap.request(whole.subarray(0, 7));
    tap.request(whole.subarray(7));
    expect(tracker.peek()[0]).toMatchObject({ active_prefill_tokens: 40, active_decode_blocks: 3 });
    tap.response(chunk(1, 1));
    expect(tracker.peek()[0]).toMatchObject({ active_prefill_tokens: 0, active_decode_blocks: 3 });
    tap.response(Buffer.concat([chunk(4, 5), chunk(4, 9)]));
    expect(tracker.peek()[0]).toMatchObject({ active_decode_blocks: 4 }); // ceil((40 + 9) / 16)
    expect(accounting.outputTokens).toBe(9);
    tap.end();
    expect(tracker.peek()[0]).toMatchObject({ active_prefill_tokens: 0, active_decode_blocks: 0 });
  });

  it('puts a call on the dp rank its x-data-parallel-rank (or older x-dynamo-dp-rank) header names, and counts invalid ranks on rank 0', () => {
    const { tracker, accounting } = setup();
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '1' })!.request(request(16));
    accounting.tap({ ...GENERATE, 'x-dynamo-dp-rank': '1' })!.request(request(4));
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '7' })!.request(request(32));
    const [rank0, rank1] = tracker.peek();
    expect(rank1).toMatchObject({ dp_rank: 1, active_prefill_tokens: 20 });
    expect(rank0).toMatchObject({ dp_rank: 0, active_prefill_tokens: 32 });
    expect(accounting.invalidRanks).toBe(1);
  });

  it("takes the request's own data_parallel_rank (field 9) over any header, since the engine obeys the field", () => {
    const { tracker, accounting } = setup();
    accounting.tap(GENERATE)!.request(request(16, 1));
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '0' })!.request(request(8, 1));
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '9' })!.request(request(4, 0)); // a bad header the field overrides
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '1' })!.request(request(2, 5)); // a rank this worker does not have
    const [rank0, rank1] = tracker.peek();
    expect(rank1).toMatchObject({ active_prefill_tokens: 24 });
    expect(rank0).toMatchObject({ active_prefill_tokens: 6 });
    expect(accounting.invalidRanks).toBe(1);
  });

  it("counts today's vLLM stream by its chunks: per-chunk completion_tokens and the final complete repeating the last chunk", () => {
    // As SMG's servicer streams (RequestOutputKind.DELTA): every chunk says completion_tokens = its own size.
    const { tracker, accounting } = setup();
    const tap = accounting.tap(GENERATE)!;
    tap.request(request(32));
    for (let i = 0; i < 5; i++) tap.response(chunk(2, 2));
    tap.response(frame('GenerateResponse', { complete: { output_ids: [7, 7], finish_reason: 'length', completion_tokens: 2 } }));
    expect(accounting.outputTokens).toBe(10);
    expect(tracker.peek()[0]).toMatchObject({ active_decode_blocks: 3 }); // ceil((32 + 10) / 16)
    // Not streamed: one complete with the whole output.
    const whole = accounting.tap(GENERATE)!;
    whole.request(request(16));
    whole.response(
      frame('GenerateResponse', { complete: { output_ids: Array.from({ length: 12 }, () => 7), finish_reason: 'length', completion_tokens: 12 } }),
    );
    expect(accounting.outputTokens).toBe(22);
  });

  it('leaves a call it cannot decode alone and counts it', () => {
    const { tracker, accounting } = setup();
    const compressed = request(40);
    compressed[0] = 1; // compressed flag: the bytes are not protobuf
    const tap = accounting.tap(GENERATE)!;
    tap.request(compressed);
    tap.response(chunk(1, 1));
    tap.end();
    expect(accounting.unparsedMessages).toBe(1);
    expect(tracker.peek()[0]).toMatchObject({ active_prefill_tokens: 0, active_decode_blocks: 0 });
    expect(accounting.outputTokens).toBe(0);
  });

  it("counts vLLM's own stream (GenerateStream and Generate): prompt_info alone is no output, num_tokens are deltas, finish_info's total wins", () => {
    const { tracker, accounting } = setup('vllm-native');
    expect(accounting.tap({ ':path': '/vllm.Control/GetServerInfo' })).toBeUndefined();
    const tap = accounting.tap({ ':path': '/vllm.Inference/GenerateStream', 'x-data-parallel-rank': '1' })!;
    tap.request(frameMessage(generateRequestBytes('vllm-native', 32)));
    tap.response(frameMessage(msg(bytes(1, num(1, 32)))));
    expect(tracker.peek()[1]).toMatchObject({ active_prefill_tokens: 32 }); // still prefill: no token yet
    for (let i = 0; i < 4; i++) tap.response(frameMessage(msg(bytes(2, [...num(3, 2), ...packed(4, tokenIds(2))]))));
    tap.response(frameMessage(msg(bytes(2, [...num(3, 1), ...bytes(8, [...num(1, 9), ...num(2, 1)])]))));
    expect(accounting.outputTokens).toBe(9);
    expect(tracker.peek()[1]).toMatchObject({ active_prefill_tokens: 0, active_decode_blocks: 3 }); // ceil((32 + 9) / 16)
    const unary = accounting.tap({ ':path': '/vllm.Inference/Generate' })!;
    unary.request(frameMessage(generateRequestBytes('vllm-native', 8)));
    unary.response(frameMessage(msg(bytes(1, num(1, 8)), bytes(2, [...num(3, 5), ...bytes(8, [...num(1, 5), ...num(2, 1)])]))));
    expect(accounting.outputTokens).toBe(14);
  });

  it("counts SGLang's own output_ids as deltas or as all ids so far, as the engine says it streams", () => {
    const { accounting } = setup('sglang-native');
    const path = { ':path': '/sglang.runtime.v1.SglangService/Generate' };
    const run = (messages: number[][]): void => {
      const tap = accounting.tap(path)!;
      tap.request(frameMessage(generateRequestBytes('sglang-native', 4)));
      messages.forEach((ids, i) => tap.response(frameMessage(msg(packed(1, ids), ...(i === messages.length - 1 ? [num(3, 1)] : [])))));
      tap.end();
    };
    // SGLang's default: every message holds all ids so far, the last one too.
    run([tokenIds(1), tokenIds(2), tokenIds(3), tokenIds(3)]);
    expect(accounting.outputTokens).toBe(3);
    // --incremental-streaming-output (told by GetServerInfo): each message holds new ids.
    accounting.cumulativeOutputIds = false;
    run([tokenIds(1), tokenIds(1), tokenIds(1), tokenIds(2)]);
    expect(accounting.outputTokens).toBe(8);
  });

  it('follows a dp size the engine told (LoadTracker.learn): a rank beyond the configured size becomes valid', () => {
    const tracker = new LoadTracker({ workerId: 1, kvBlockSize: 16 });
    const accounting = new TrafficAccounting(tracker, 'vllm');
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '2' })!.request(request(5));
    expect(accounting.invalidRanks).toBe(1);
    tracker.learn({ kvTotalBlocks: undefined, kvBlockSize: undefined, maxNumBatchedTokens: undefined, dataParallelSize: 4 });
    accounting.tap({ ...GENERATE, 'x-data-parallel-rank': '2' })!.request(request(5));
    expect(accounting.invalidRanks).toBe(1);
    expect(tracker.peek().map((e) => e.active_prefill_tokens)).toEqual([5, 0, 5, 0]);
  });
});
