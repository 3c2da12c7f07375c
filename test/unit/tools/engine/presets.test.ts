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
  /** Mean inter-token latency, ms. */
  readonly itlMs: number;
}

/** What docs/simulated-engine.md cites for each preset, batch 1 first, then the large batch. */
const CITED: Readonly<Record<PresetName, readonly Published[]>> = {
  // NVIDIA NIM for LLMs benchmarking, Llama-3.3-70b-instruct, NIM 1.8.0, 2 x H100 80G, fp8 TP2.
  'llama-3.3-70b-fp8-2xh100': [
    { concurrency: 1, inputTokens: 5000, outputTokens: 500, itlMs: 18.58 },
    { concurrency: 50, inputTokens: 5000, outputTokens: 500, itlMs: 59.73 },
    { concurrency: 1, inputTokens: 500, outputTokens: 2000, itlMs: 18.91 },
  ],
};

/**
 * Mean ITL of a closed-loop benchmark on the preset, as AIPerf computes it per request:
 * (last token - first token) / (output tokens - 1), averaged over `rounds` x C requests.
 */
function replayItl(name: PresetName, run: Published, rounds = 3): number {
  const preset = ENGINE_PRESETS[name];
  const timers = new FakeTimers();
  const config = { ...presetLimits(name, 16), blockSize: 16, prefillTokensPerS: 1, decodeStepMs: 1, earlyStopProb: 0, seed: 0, vocabSize: 32_000 };
  const scheduler = new Scheduler(config, timers, (work) => stepMs(preset.cost, work));
  const itls: number[] = [];
  const total = run.concurrency * rounds;
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
  for (let i = 0; i < run.concurrency; i++) start();
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
    // (2 * 80 GiB * 0.9 - 70.55e9 bytes) / (16 tokens * 163840 bytes) = 32069.86 blocks
    expect(presetLimits('llama-3.3-70b-fp8-2xh100', 16)).toEqual({ numGpuBlocks: 32_069, maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
    // Twice the block size, half the blocks.
    expect(presetLimits('llama-3.3-70b-fp8-2xh100', 32).numGpuBlocks).toBe(16_034);
  });

  it('knows its names and nothing else', () => {
    expect(isPresetName('llama-3.3-70b-fp8-2xh100')).toBe(true);
    expect(isPresetName('none')).toBe(false);
    expect(isPresetName('toString')).toBe(false);
  });
});
