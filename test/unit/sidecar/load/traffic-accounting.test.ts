import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { TrafficAccounting } from '../../../../src/sidecar/load/traffic-accounting.js';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import type { GenerateWire } from '../../../../src/protocol/engine/generate-wire.js';

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
  return { tracker, accounting: new TrafficAccounting(tracker, 2, wire) };
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
});
