/** SeriesHistory keeps the last N samples with gaps as null; ratePerSecond treats a counter that went down as restarted. */
import { describe, expect, it } from 'vitest';
import { ratePerSecond, SeriesHistory } from '../../../../src/platform/status/series-history.js';

describe('SeriesHistory', () => {
  it('keeps only the last `capacity` samples, a missing value as null', () => {
    const h = new SeriesHistory(3, ['a', 'b']);
    for (let i = 1; i <= 5; i++) h.push(i * 1000, i % 2 ? { a: i } : { a: i, b: i });
    expect(h.toJSON()).toEqual({ t: [3000, 4000, 5000], series: { a: [3, 4, 5], b: [null, 4, null] } });
    expect(h.latest('a')).toBe(5);
    expect(h.latest('b')).toBeNull();
    expect(h.latest('nope')).toBeNull();
  });
});

describe('ratePerSecond', () => {
  it.each([
    [10, 30, 2000, 10],
    [10, 10, 1000, 0],
    [50, 5, 1000, 5], // reset: counted from 0
    [0, 5, 0, 0],
  ])('from %d to %d over %d ms is %d/s', (before, after, ms, rate) => {
    expect(ratePerSecond(before, after, ms)).toBe(rate);
  });
});
