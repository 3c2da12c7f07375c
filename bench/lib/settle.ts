/**
 * Warm-up until the JIT has settled: a target gets back-to-back slices of load before its first
 * measured round, each slice's proxy CPU per unit (per call, per message, per rejection) is
 * recorded, and the warm-up ends once three consecutive slices agree (each within the tolerance
 * of the one before), or at the cap (then the report says "not settled"). Two agreeing slices
 * were not enough: the sidecar's streaming CPU went 13.0, 12.5 us/msg (4% apart) and then on
 * down to 9 over the next rounds. The series is printed, so the settling shows.
 */

export interface SettleRule {
  readonly sliceMs: number;
  readonly minSlices: number;
  readonly maxSlices: number;
  /** Relative difference between the last two slices that counts as settled. */
  readonly tolerance: number;
}

/**
 * quick: three short slices, judged but rarely settled. Otherwise up to 8 slices of sliceMs: 1 s
 * where a slice holds plenty of work (unary); 2 s where one holds little (streaming at 12.8k
 * msg/s, overload at 1,600 calls/s), whose 1 s slices differed by 10-25% from noise alone.
 */
export function settleRule(quick: boolean, sliceMs = 1000): SettleRule {
  return quick ? { sliceMs: 500, minSlices: 3, maxSlices: 3, tolerance: 0.05 } : { sliceMs, minSlices: 3, maxSlices: 8, tolerance: 0.05 };
}

/** Consecutive slices that must agree. */
const AGREEING = 3;

/** True when each of the last AGREEING values is within the tolerance of the one before. */
export function hasSettled(series: readonly number[], rule: SettleRule): boolean {
  if (series.length < Math.max(AGREEING, rule.minSlices)) return false;
  for (let i = series.length - AGREEING + 1; i < series.length; i++) {
    const a = series[i - 1]!;
    const b = series[i]!;
    if (!(Number.isFinite(a) && Number.isFinite(b) && a > 0 && Math.abs(b - a) / a < rule.tolerance)) return false;
  }
  return true;
}

/** Whether another slice is due: not settled and under the cap (without a CPU figure: minSlices). */
export function wantsAnotherSlice(series: readonly number[], rule: SettleRule, measurable: boolean): boolean {
  if (!measurable) return series.length < rule.minSlices;
  return series.length < rule.maxSlices && !hasSettled(series, rule);
}

/**
 * Runs slices back to back while another is due; `slice` runs one and returns the proxy's CPU per
 * unit in it. settled is null when there is no proxy CPU to judge (measurable false: direct).
 */
export async function warmUp(rule: SettleRule, measurable: boolean, slice: () => Promise<number>): Promise<{ slices: number[]; settled: boolean | null }> {
  const slices: number[] = [];
  do slices.push(await slice());
  while (wantsAnotherSlice(slices, rule, measurable));
  return { slices, settled: measurable ? hasSettled(slices, rule) : null };
}
