/**
 * Warm-up until the JIT has settled: a target gets back-to-back slices of load before its first
 * measured round, each slice's proxy CPU per unit (per call, per message, per rejection) is
 * recorded, and the warm-up ends once two consecutive slices agree within the tolerance, or at
 * the cap (then the report says "not settled"). The series is printed, so the settling shows.
 */

export interface SettleRule {
  readonly sliceMs: number;
  readonly minSlices: number;
  readonly maxSlices: number;
  /** Relative difference between the last two slices that counts as settled. */
  readonly tolerance: number;
}

export function settleRule(quick: boolean): SettleRule {
  return quick ? { sliceMs: 500, minSlices: 2, maxSlices: 3, tolerance: 0.05 } : { sliceMs: 1000, minSlices: 2, maxSlices: 8, tolerance: 0.05 };
}

/** True when the last two values differ by less than the tolerance (relative to the earlier one). */
export function settled(series: readonly number[], rule: SettleRule): boolean {
  if (series.length < Math.max(2, rule.minSlices)) return false;
  const a = series[series.length - 2]!;
  const b = series[series.length - 1]!;
  return Number.isFinite(a) && Number.isFinite(b) && a > 0 && Math.abs(b - a) / a < rule.tolerance;
}

/** Whether another slice is due: not settled and under the cap (without a CPU figure: minSlices). */
export function wantsAnotherSlice(series: readonly number[], rule: SettleRule, measurable: boolean): boolean {
  if (!measurable) return series.length < rule.minSlices;
  return series.length < rule.maxSlices && !settled(series, rule);
}
