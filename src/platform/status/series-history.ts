/**
 * The last `capacity` samples of a few named series, one sample per tick, for the status pages'
 * sparklines. A fixed ring: memory does not grow with uptime. Also the per-second rate of a
 * counter between two ticks, where a counter that went down (a restart, a reset) counts from 0.
 */

export class SeriesHistory {
  private readonly series = new Map<string, (number | null)[]>();
  private readonly times: number[] = [];

  constructor(
    private readonly capacity: number,
    names: readonly string[],
  ) {
    for (const name of names) this.series.set(name, []);
  }

  /** One sample per series at `timeMs`; a series not given gets null (a gap, not a zero). */
  push(timeMs: number, values: Readonly<Record<string, number | null>>): void {
    this.times.push(timeMs);
    if (this.times.length > this.capacity) this.times.shift();
    for (const [name, points] of this.series) {
      points.push(values[name] ?? null);
      if (points.length > this.capacity) points.shift();
    }
  }

  /** Latest value of a series, or null. */
  latest(name: string): number | null {
    const points = this.series.get(name);
    return points?.length ? (points[points.length - 1] ?? null) : null;
  }

  toJSON(): { t: number[]; series: Record<string, (number | null)[]> } {
    return { t: [...this.times], series: Object.fromEntries([...this.series].map(([name, points]) => [name, [...points]])) };
  }
}

/** Per second, from two readings of a counter `elapsedMs` apart; a counter that went down restarted at 0. */
export function ratePerSecond(previous: number, current: number, elapsedMs: number): number {
  if (elapsedMs <= 0) return 0;
  const delta = current >= previous ? current - previous : current;
  return (delta * 1000) / elapsedMs;
}
