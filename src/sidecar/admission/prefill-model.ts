/**
 * Learns a worker's prefill model online from its first tokens (ttft-prediction.ts): each
 * sample is the prefill a call waited for (x: the tokens ahead of it plus its own, or the batch it
 * shared its first step with when that was larger; kv-ledger.ts) and the time from its engine slot
 * to its first token (y). A least-squares line y = a + x / rate, with exponential
 * forgetting so that a change in the engine's speed (another model, a thermal throttle, a
 * neighbour on the GPU) is followed within a few dozen calls, as Dynamo's planner fits step time
 * on scheduled prefill tokens.
 *
 * Taken at a high quantile, not the mean: the base carries `z` standard deviations of the recent
 * residuals (z = 1.28 is the 90th percentile of a normal spread), so the prediction errs late,
 * and a refusal by it is one the call would most likely have missed its SLO by anyway.
 *
 *   model.sample(4096, 310); ... model.model  // -> { baseMs, tokensPerS } after MIN_SAMPLES
 */
import type { PrefillModel } from '../../protocol/ttft-prediction.js';

/** Dynamo's planner fits on at least 5 points; fewer give no model (nothing is refused by prediction). */
export const MIN_PREFILL_SAMPLES = 5;
/** Weight kept by the past at each sample: 0.95 forgets half in 14 samples. */
export const PREFILL_FORGETTING = 0.95;
/** 1.28: the 90th percentile of a normal spread of residuals. */
export const PREFILL_QUANTILE_Z = 1.28;
/** The slowest and fastest rates believed (tokens/s): outside them a sample set is noise, not an engine. */
const MIN_RATE = 1;
const MAX_RATE = 1e8;

export class PrefillLearner {
  private w = 0;
  private sx = 0;
  private sy = 0;
  private sxx = 0;
  private sxy = 0;
  /** Exponentially weighted mean of squared residuals against the model before each sample. */
  private residualVar = 0;
  private count = 0;
  private current: PrefillModel | undefined;

  constructor(
    private readonly forgetting = PREFILL_FORGETTING,
    private readonly z = PREFILL_QUANTILE_Z,
  ) {}

  /** Samples taken since start. */
  get samples(): number {
    return this.count;
  }

  /** The model at the quantile; undefined until MIN_PREFILL_SAMPLES samples. */
  get model(): PrefillModel | undefined {
    return this.current;
  }

  /** The mean line (without the quantile), for tests and the status page. */
  private fit(): { a: number; b: number } | undefined {
    const det = this.w * this.sxx - this.sx * this.sx;
    // All samples at (nearly) one size: no slope can be told from the base; the time goes to the
    // tokens (through the origin), which errs late for longer prompts, the safe side.
    let b = Math.abs(det) > 1e-9 * this.w * this.sxx ? (this.w * this.sxy - this.sx * this.sy) / det : this.sxx > 0 ? this.sxy / this.sxx : 0;
    let a = (this.sy - b * this.sx) / this.w;
    if (!(b > 0)) {
      // Time does not grow with tokens in these samples: the mean as the base, and the slowest believed rate.
      b = 1000 / MAX_RATE;
      a = this.sy / this.w;
    } else if (a < 0) {
      a = 0;
      b = this.sxx > 0 ? this.sxy / this.sxx : b;
    }
    if (!Number.isFinite(a) || !Number.isFinite(b)) return undefined;
    return { a, b: Math.min(Math.max(b, 1000 / MAX_RATE), 1000 / MIN_RATE) };
  }

  /** One first token: `tokens` prefill tokens (ahead plus own) took `ms` from slot to first token. Non-finite or negative input is ignored. */
  sample(tokens: number, ms: number): void {
    if (!(tokens >= 0 && Number.isFinite(tokens)) || !(ms >= 0 && Number.isFinite(ms))) return;
    // The spread is measured against a fitted line only: the first points' degenerate fits would inflate it.
    const before = this.count >= MIN_PREFILL_SAMPLES ? this.fit() : undefined;
    if (before) {
      const residual = ms - (before.a + before.b * tokens);
      this.residualVar = this.forgetting * this.residualVar + (1 - this.forgetting) * residual * residual;
    }
    const f = this.forgetting;
    this.w = f * this.w + 1;
    this.sx = f * this.sx + tokens;
    this.sy = f * this.sy + ms;
    this.sxx = f * this.sxx + tokens * tokens;
    this.sxy = f * this.sxy + tokens * ms;
    this.count++;
    if (this.count < MIN_PREFILL_SAMPLES) return;
    const line = this.fit();
    if (!line) return;
    this.current = Object.freeze({ baseMs: line.a + this.z * Math.sqrt(this.residualVar), tokensPerS: 1000 / line.b });
  }
}
