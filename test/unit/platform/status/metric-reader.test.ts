/** Reading a registry's counters and histograms for the status pages, and quantiles from bucket deltas. */
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { bucketDelta, bucketQuantile, histogramBuckets, sumByLabel } from '../../../../src/platform/status/metric-reader.js';

describe('metric reader', () => {
  it('sums a counter by one label, or in total, and reads an unknown metric as empty', async () => {
    const registry = new Registry();
    const c = new Counter({ name: 'x_total', help: 'x', labelNames: ['status', 'model'], registers: [registry] });
    c.inc({ status: '200', model: 'a' }, 3);
    c.inc({ status: '200', model: 'b' }, 2);
    c.inc({ status: '529', model: 'a' }, 7);
    expect(await sumByLabel(registry, 'x_total', 'status')).toEqual(
      new Map([
        ['200', 5],
        ['529', 7],
      ]),
    );
    expect(await sumByLabel(registry, 'x_total')).toEqual(new Map([['', 12]]));
    expect(await sumByLabel(registry, 'nope_total', 'status')).toEqual(new Map());
  });

  it('reads a histogram as cumulative buckets over all label sets, +Inf last', async () => {
    const registry = new Registry();
    const h = new Histogram({ name: 'lat_seconds', help: 'l', labelNames: ['model'], buckets: [0.1, 1], registers: [registry] });
    h.observe({ model: 'a' }, 0.05);
    h.observe({ model: 'b' }, 0.5);
    h.observe({ model: 'b' }, 5);
    expect(await histogramBuckets(registry, 'lat_seconds')).toEqual([
      [0.1, 1],
      [1, 2],
      [Infinity, 3],
    ]);
  });

  it('interpolates a quantile inside its bucket, as histogram_quantile() does', () => {
    const buckets: [number, number][] = [
      [0.1, 0],
      [0.2, 10],
      [Infinity, 10],
    ];
    expect(bucketQuantile(0.5, buckets)).toBeCloseTo(0.15);
    expect(
      bucketQuantile(0.99, [
        [1, 0],
        [Infinity, 4],
      ]),
    ).toBe(1);
    expect(
      bucketQuantile(0.5, [
        [1, 0],
        [Infinity, 0],
      ]),
    ).toBeNull();
    expect(bucketQuantile(0.5, [])).toBeNull();
  });

  it('subtracts an earlier reading, and takes a reset histogram as counted from 0', () => {
    expect(
      bucketDelta(
        [
          [1, 5],
          [Infinity, 9],
        ],
        [
          [1, 2],
          [Infinity, 3],
        ],
      ),
    ).toEqual([
      [1, 3],
      [Infinity, 6],
    ]);
    expect(
      bucketDelta(
        [
          [1, 1],
          [Infinity, 1],
        ],
        [
          [1, 2],
          [Infinity, 3],
        ],
      ),
    ).toEqual([
      [1, 1],
      [Infinity, 1],
    ]);
    expect(bucketDelta([[1, 1]], undefined)).toEqual([[1, 1]]);
  });
});
