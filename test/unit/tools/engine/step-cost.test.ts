// Which step cost an engine's options choose, and the time scale over it.
import { describe, expect, it } from 'vitest';
import { stepMs } from '../../../../src/tools/engine/cost-model.js';
import { resolveEngineOptions } from '../../../../src/tools/engine/options.js';
import { ENGINE_PRESETS } from '../../../../src/tools/engine/presets.js';
import { effectiveCostModel, engineStepCost, fixedStepCost } from '../../../../src/tools/engine/step-cost.js';

const PRESET = 'llama-3.3-70b-fp8-2xh100';
const DECODE_8 = { decodeSequences: 8, decodeContextTokens: 8 * 1000, prefillTokens: 0 };
const MIXED = { decodeSequences: 8, decodeContextTokens: 8 * 1000, prefillTokens: 500 };

describe('step cost', () => {
  it('fixed: decode_step_ms if anything decodes, plus prefill tokens / rate, whatever the batch and context', () => {
    const cost = fixedStepCost({ decodeStepMs: 20, prefillTokensPerS: 50_000 });
    expect(cost({ decodeSequences: 1, decodeContextTokens: 10, prefillTokens: 0 })).toBe(20);
    expect(cost({ decodeSequences: 256, decodeContextTokens: 1_000_000, prefillTokens: 0 })).toBe(20);
    expect(cost({ decodeSequences: 0, decodeContextTokens: 0, prefillTokens: 500 })).toBe(10);
    expect(cost({ decodeSequences: 3, decodeContextTokens: 300, prefillTokens: 500 })).toBe(30);
  });

  it('is fixed with no preset, roofline with one, and what --cost-model says when it says', () => {
    expect(effectiveCostModel({ costModel: 'auto', preset: 'none' })).toBe('fixed');
    expect(effectiveCostModel({ costModel: 'auto', preset: PRESET })).toBe('roofline');
    expect(effectiveCostModel({ costModel: 'fixed', preset: PRESET })).toBe('fixed');
    expect(effectiveCostModel({ costModel: 'roofline', preset: PRESET })).toBe('roofline');
  });

  it("prices an engine's steps as the table's fixed step by default", () => {
    const cost = engineStepCost(resolveEngineOptions());
    expect(cost(DECODE_8)).toBe(20);
    expect(cost(MIXED)).toBe(30);
  });

  it("prices a preset's steps with its cost model, and --cost-model fixed keeps the fixed step", () => {
    const roofline = engineStepCost(resolveEngineOptions({ preset: PRESET }));
    expect(roofline(MIXED)).toBe(stepMs(ENGINE_PRESETS[PRESET].cost, MIXED));
    const fixed = engineStepCost(resolveEngineOptions({ preset: PRESET, costModel: 'fixed', decodeStepMs: 7 }));
    expect(fixed(DECODE_8)).toBe(7);
  });

  it('multiplies every step by --time-scale, under either model', () => {
    expect(engineStepCost(resolveEngineOptions({ timeScale: 3 }))(MIXED)).toBe(90);
    const scaled = engineStepCost(resolveEngineOptions({ preset: PRESET, timeScale: 10 }));
    expect(scaled(MIXED)).toBeCloseTo(10 * stepMs(ENGINE_PRESETS[PRESET].cost, MIXED), 9);
  });
});
