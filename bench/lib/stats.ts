/** Order statistics for benchmark samples. Percentiles use the nearest-rank method. */

export interface Distribution {
  readonly count: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

/** Nearest-rank percentile of an already sorted array; NaN when empty. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function distribution(samples: ArrayLike<number>): Distribution {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i]!;
  return {
    count: sorted.length,
    p50: percentileSorted(sorted, 50),
    p90: percentileSorted(sorted, 90),
    p99: percentileSorted(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    mean: sorted.length ? sum / sorted.length : NaN,
  };
}

/** Median of the finite values; NaN when there are none. */
export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 ? finite[mid]! : (finite[mid - 1]! + finite[mid]!) / 2;
}

/** A figure over rounds: the median and the extremes, so every table shows how much it moved. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Rounds with a finite value. */
  readonly n: number;
}

export function spread(values: readonly (number | null | undefined)[]): Spread {
  const finite = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  if (finite.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length };
}

/**
 * Fixed-size uniform sample of an unbounded stream (reservoir sampling), so a client
 * receiving millions of messages keeps bounded memory and unbiased percentiles.
 */
export class Reservoir {
  private readonly buf: Float64Array;
  private seen = 0;

  constructor(capacity = 200_000) {
    this.buf = new Float64Array(capacity);
  }

  add(value: number): void {
    const i = this.seen++;
    if (i < this.buf.length) this.buf[i] = value;
    else {
      const j = Math.floor(Math.random() * this.seen);
      if (j < this.buf.length) this.buf[j] = value;
    }
  }

  get count(): number {
    return this.seen;
  }

  values(): Float64Array {
    return this.buf.subarray(0, Math.min(this.seen, this.buf.length));
  }
}
