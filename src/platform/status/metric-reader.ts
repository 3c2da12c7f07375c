/**
 * Reads a process's own prom-client registry for its status page, so the page shows the very
 * numbers /metrics does and no second set of counters is kept. Each read runs the metric's
 * collect(), as a scrape would, for one metric only.
 */
import type { Registry } from 'prom-client';

interface Sample {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
  readonly metricName?: string;
}

async function samples(registry: Registry, name: string): Promise<readonly Sample[]> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return [];
  return (await metric.get()).values as readonly Sample[];
}

/** Sum of a counter's or gauge's samples per value of `label` ('' when the sample lacks it); by '' alone with no label. */
export async function sumByLabel(registry: Registry, name: string, label?: string): Promise<Map<string, number>> {
  const sums = new Map<string, number>();
  for (const sample of await samples(registry, name)) {
    const key = label === undefined ? '' : String(sample.labels[label] ?? '');
    sums.set(key, (sums.get(key) ?? 0) + sample.value);
  }
  return sums;
}

/** A histogram's cumulative bucket counts summed over all its label sets, by upper bound (ascending, +Inf last). */
export async function histogramBuckets(registry: Registry, name: string): Promise<[le: number, count: number][]> {
  const byBound = new Map<number, number>();
  for (const sample of await samples(registry, name)) {
    if (sample.metricName !== `${name}_bucket`) continue;
    const le = sample.labels['le'];
    const bound = le === '+Inf' ? Infinity : Number(le);
    byBound.set(bound, (byBound.get(bound) ?? 0) + sample.value);
  }
  return [...byBound].sort((a, b) => a[0] - b[0]);
}

/**
 * The q-quantile of the observations counted by cumulative `buckets` (as histogram_quantile():
 * linear inside the bucket, the highest finite bound when it falls in +Inf); null with none.
 */
export function bucketQuantile(q: number, buckets: readonly (readonly [le: number, count: number])[]): number | null {
  const total = buckets.length ? buckets[buckets.length - 1]![1] : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return lowerBound;
      if (count === lowerCount) return le;
      return lowerBound + ((le - lowerBound) * (rank - lowerCount)) / (count - lowerCount);
    }
    lowerBound = le;
    lowerCount = count;
  }
  return lowerBound;
}

/** Cumulative buckets minus an earlier reading of the same histogram (a reset counts from 0). */
export function bucketDelta(current: readonly (readonly [number, number])[], earlier: readonly (readonly [number, number])[] | undefined): [number, number][] {
  const before = new Map(earlier ?? []);
  const reset = current.some(([le, count]) => count < (before.get(le) ?? 0));
  return current.map(([le, count]) => [le, reset ? count : count - (before.get(le) ?? 0)]);
}
