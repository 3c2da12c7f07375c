/**
 * The duration of each scheduler step, as the engine's options choose it: `fixed` (today's
 * constant decode step plus prefill at a fixed rate) or `roofline` (the preset's GPU cost model,
 * cost-model.ts), times --time-scale. The scheduler asks this for every step it plans.
 */
import { stepMs, type StepWork } from './cost-model.js';
import type { EngineOptions } from './options.js';
import { ENGINE_PRESETS, isPresetName } from './presets.js';

export type { StepWork } from './cost-model.js';

/** Milliseconds one step with this work lasts. */
export type StepCost = (work: StepWork) => number;

/**
 * The constant model: a step lasts decode_step_ms if anything decodes, plus prefill tokens /
 * prefill rate, whatever the batch size and context.
 */
export function fixedStepCost(config: Pick<EngineOptions, 'decodeStepMs' | 'prefillTokensPerS'>): StepCost {
  return (work) => (work.decodeSequences > 0 ? config.decodeStepMs : 0) + (work.prefillTokens * 1000) / config.prefillTokensPerS;
}

/** The cost model in effect: `auto` is roofline when a preset is chosen, else fixed. */
export function effectiveCostModel(options: Pick<EngineOptions, 'costModel' | 'preset'>): 'fixed' | 'roofline' {
  if (options.costModel !== 'auto') return options.costModel;
  return options.preset === 'none' ? 'fixed' : 'roofline';
}

/** The step cost of an engine with these (validated) options, time scale applied. */
export function engineStepCost(options: EngineOptions): StepCost {
  let base = fixedStepCost(options);
  if (effectiveCostModel(options) === 'roofline') {
    // Validated options never pair roofline with no preset; the check keeps the types honest.
    if (!isPresetName(options.preset)) throw new Error(`cost model roofline needs a preset, got ${JSON.stringify(options.preset)}`);
    const cost = ENGINE_PRESETS[options.preset].cost;
    base = (work) => stepMs(cost, work);
  }
  const scale = options.timeScale;
  return scale === 1 ? base : (work) => base(work) * scale;
}
