// Each preset against the measurement it was calibrated to: the published benchmark is replayed
// through the real scheduler on a fake clock (closed loop: C requests in flight, a new one as each
// finishes, fixed input and output lengths), its ITL computed as the benchmark does, and it must
// land within 25% of the published figure at batch 1 and at the large batch. Sources and
// conditions: docs/simulated-engine.md.
import { describe, expect, it } from 'vitest';
import { stepMs } from '../../../../src/tools/engine/cost-model.js';
import { ENGINE_PRESETS, isPresetName, PRESET_NAMES, presetLimits, type PresetName } from '../../../../src/tools/engine/presets.js';
import { Scheduler } from '../../../../src/tools/engine/scheduler.js';
import { FakeTimers } from '../../../support/fake-timers.js';

interface Published {
  readonly concurrency: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Requests the replay sends in all (the benchmark's own count where it gives one). */
  readonly requests: number;
  /** Published inter-token latency (mean ITL, or median TPOT where that is what was published), ms. */
  readonly itlMs: number;
}

/** What docs/simulated-engine.md cites for each preset, batch 1 first, then the large batch. */
const CITED: Readonly<Record<PresetName, readonly Published[]>> = {
  // NVIDIA NIM for LLMs benchmarking, Llama-3.3-70b-instruct, NIM 1.8.0, 2 x H100 80G, fp8 TP2.
  'llama-3.3-70b-fp8-2xh100': [
    { concurrency: 1, inputTokens: 5000, outputTokens: 500, requests: 3, itlMs: 18.58 },
    { concurrency: 50, inputTokens: 5000, outputTokens: 500, requests: 150, itlMs: 59.73 },
    { concurrency: 1, inputTokens: 500, outputTokens: 2000, requests: 1, itlMs: 18.91 },
  ],
  // ree2raz/inference-bench, results/summary.csv: vllm, short regime (about 200 in / 128 out),
  // vLLM 0.8.5, Qwen2.5-7B-Instruct fp16 on one L4, median TPOT of 3 runs of 100 requests.
  'qwen2.5-7b-fp16-l4': [
    { concurrency: 1, inputTokens: 200, outputTokens: 128, requests: 100, itlMs: 58.3 },
    { concurrency: 64, inputTokens: 200, outputTokens: 128, requests: 100, itlMs: 75.7 },
  ],
};

/**
 * Mean ITL of a closed-loop benchmark on the preset, as AIPerf computes it per request:
 * (last token - first token) / (output tokens - 1), averaged over the run's requests.
 */
function replayItl(name: PresetName, run: Published): number {
  const preset = ENGINE_PRESETS[name];
  const timers = new FakeTimers();
  const config = { ...presetLimits(name, 16), blockSize: 16, prefillTokensPerS: 1, decodeStepMs: 1, earlyStopProb: 0, seed: 0, vocabSize: 32_000 };
  const scheduler = new Scheduler(config, timers, (work) => stepMs(preset.cost, work));
  const itls: number[] = [];
  const total = run.requests;
  let started = 0;
  const start = (): void => {
    const id = started++;
    let first: number | undefined;
    const promptIds = Array.from({ length: run.inputTokens }, (_, i) => id * 1_000_000 + i + 1);
    scheduler.submit({ promptIds, maxTokens: run.outputTokens }, (_ids, finish) => {
      first ??= timers.now;
      if (finish === undefined) return;
      itls.push((timers.now - first) / (run.outputTokens - 1));
      if (started < total) start();
    });
  };
  for (let i = 0; i < Math.min(run.concurrency, total); i++) start();
  for (let guard = 0; guard < 100_000 && itls.length < total; guard++) timers.advance(1000);
  expect(itls).toHaveLength(total);
  expect(scheduler.stats().preemptions).toBe(0);
  return itls.reduce((sum, itl) => sum + itl, 0) / itls.length;
}

describe('engine presets', () => {
  it('has a cited calibration for every preset, starting at batch 1 and reaching a large batch', () => {
    expect(Object.keys(CITED).sort()).toEqual([...PRESET_NAMES].sort());
    for (const runs of Object.values(CITED)) {
      expect(runs[0]!.concurrency).toBe(1);
      expect(Math.max(...runs.map((r) => r.concurrency))).toBeGreaterThanOrEqual(32);
    }
  });

  it.each(PRESET_NAMES.flatMap((name) => CITED[name].map((run) => [name, run] as const)))(
    '%s: the replayed ITL is within 25%% of the published figure (%o)',
    (name, run) => {
      const itl = replayItl(name, run);
      expect(Math.abs(itl / run.itlMs - 1), `model ${itl.toFixed(2)} ms vs published ${run.itlMs} ms`).toBeLessThanOrEqual(0.25);
    },
  );

  it("llama-3.3-70b-fp8-2xh100: a decode step at batch 1 is the overhead plus weights and one context's KV over 58% of 2 x 3.35 TB/s", () => {
    const cost = ENGINE_PRESETS['llama-3.3-70b-fp8-2xh100'].cost;
    // (70.55e9 + 5250 * 2*80*8*128 bytes) / (2 * 3.35e12 * 0.58) s + 0.5 ms
    const expected = ((70.55e9 + 5250 * 163_840) / (2 * 3.35e12 * 0.58)) * 1000 + 0.5;
    expect(stepMs(cost, { decodeSequences: 1, decodeContextTokens: 5250, prefillTokens: 0 })).toBeCloseTo(expected, 9);
    expect(expected).toBeCloseTo(18.87, 1);
  });

  it("llama-3.3-70b-fp8-2xh100: vLLM's limits on H100: KV from 2 x 80 GiB * 0.9 - weights, 1024 seqs, 8192 tokens", () => {
    // (2 * 81,559 MiB * 0.9 - 70.55e9 bytes) / (16 tokens * 163,840 bytes) = 31,809.8 blocks
    expect(presetLimits('llama-3.3-70b-fp8-2xh100', 16)).toEqual({ numGpuBlocks: 31_809, maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
    // Twice the block size, half the blocks.
    expect(presetLimits('llama-3.3-70b-fp8-2xh100', 32).numGpuBlocks).toBe(15_904);
  });

  it("qwen2.5-7b-fp16-l4: a decode step at batch 1 is the overhead plus fp16 weights and one context's KV over 88% of 300 GB/s", () => {
    const cost = ENGINE_PRESETS['qwen2.5-7b-fp16-l4'].cost;
    // (7.616e9 * 2 + 264 * 2*28*4*128*2 bytes) / (300e9 * 0.88) s + 1 ms
    const expected = ((7.616e9 * 2 + 264 * 57_344) / (300e9 * 0.88)) * 1000 + 1;
    expect(stepMs(cost, { decodeSequences: 1, decodeContextTokens: 264, prefillTokens: 0 })).toBeCloseTo(expected, 9);
    expect(expected).toBeCloseTo(58.75, 1);
  });

  it("qwen2.5-7b-fp16-l4: vLLM's limits on an L4: KV from 23,034 MiB * 0.9 - weights, 256 seqs, 2048 tokens", () => {
    // (23,034 MiB * 0.9 - 15.232e9 bytes) / (16 tokens * 57,344 bytes) = 7,090.6 blocks
    expect(presetLimits('qwen2.5-7b-fp16-l4', 16)).toEqual({ numGpuBlocks: 7090, maxNumSeqs: 256, maxNumBatchedTokens: 2048 });
  });

  it('knows its names and nothing else', () => {
    expect(isPresetName('llama-3.3-70b-fp8-2xh100')).toBe(true);
    expect(isPresetName('qwen2.5-7b-fp16-l4')).toBe(true);
    expect(isPresetName('none')).toBe(false);
    expect(isPresetName('toString')).toBe(false);
  });
});
