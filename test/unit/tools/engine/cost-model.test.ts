// The GPU cost model against its formula, on a toy model whose numbers are easy by hand:
// 1e9 bf16 parameters (2e9 weight bytes), KV per token 2 * 10 layers * 2 heads * 64 * 2 bytes
// = 5120 bytes, on 2 GPUs of 1e12 B/s and 1e14 FLOP/s at efficiency 0.5 (so 1e12 B/s and
// 1e14 FLOP/s in all), 1 ms fixed overhead.
import { describe, expect, it } from 'vitest';
import { decodeMs, kvBlocks, kvBytesPerToken, prefillMs, stepMs, weightBytes, type CostModel } from '../../../../src/tools/engine/cost-model.js';

const TOY: CostModel = {
  model: { parameters: 1e9, layers: 10, kvHeads: 2, headDim: 64, weightBytes: 2, kvBytes: 2 },
  gpu: { count: 2, memoryBytes: 10e9, bandwidthBytesPerS: 1e12, peakFlops: 1e14 },
  calibration: { efficiency: 0.5, fixedOverheadMs: 1 },
};

describe('cost model', () => {
  it('counts K and V for every layer and KV head: 2 * layers * kv_heads * head_dim * bytes per token', () => {
    expect(kvBytesPerToken(TOY.model)).toBe(5120);
    expect(weightBytes(TOY.model)).toBe(2e9);
  });

  it('prices decode as the weights once plus the KV of every decoding sequence, over the effective bandwidth', () => {
    // (2e9 + 1000 * 5120) bytes / 1e12 B/s = 2.00512 ms
    expect(decodeMs(TOY, 1000)).toBeCloseTo(2.00512, 9);
    // 4 sequences of 1000 tokens read 4x the KV: (2e9 + 4000 * 5120) / 1e12 = 2.02048 ms
    expect(decodeMs(TOY, 4000)).toBeCloseTo(2.02048, 9);
  });

  it('prices prefill as 2 * parameters FLOPs per token over the effective FLOPS', () => {
    // 2 * 1e9 * 500 = 1e12 FLOPs / 1e14 FLOP/s = 10 ms
    expect(prefillMs(TOY, 500)).toBeCloseTo(10, 9);
  });

  it('adds the fixed overhead to a step, and both parts to a mixed batch', () => {
    expect(stepMs(TOY, { decodeSequences: 1, decodeContextTokens: 1000, prefillTokens: 0 })).toBeCloseTo(3.00512, 9);
    expect(stepMs(TOY, { decodeSequences: 0, decodeContextTokens: 0, prefillTokens: 500 })).toBeCloseTo(11, 9);
    expect(stepMs(TOY, { decodeSequences: 1, decodeContextTokens: 1000, prefillTokens: 500 })).toBeCloseTo(13.00512, 9);
    expect(stepMs(TOY, { decodeSequences: 0, decodeContextTokens: 0, prefillTokens: 0 })).toBe(0);
  });

  it('gives a step that grows with the batch and with the context it reads', () => {
    const step = (sequences: number, context: number) =>
      stepMs(TOY, { decodeSequences: sequences, decodeContextTokens: sequences * context, prefillTokens: 0 });
    expect(step(64, 1000)).toBeGreaterThan(step(1, 1000));
    expect(step(1, 100_000)).toBeGreaterThan(step(1, 1000));
  });

  it("sizes vLLM's KV pool as (memory * utilization - weights) / block bytes over all GPUs", () => {
    // (2 * 10e9 * 0.9 - 2e9) / (16 * 5120) = 16e9 / 81920 = 195312.5 -> 195312 blocks
    expect(kvBlocks(TOY, 16, 0.9)).toBe(195_312);
    // Weights larger than the memory leave no KV at all.
    expect(kvBlocks({ ...TOY, gpu: { ...TOY.gpu, memoryBytes: 1e9 } }, 16, 0.9)).toBe(0);
  });
});
