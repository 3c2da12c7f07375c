/**
 * The seeded PRNG and hashes behind every "same seed, same run" promise (the load tool's
 * --seed, the simulated engine's token ids and early stops): sequences and hashes are pinned to
 * reference values, so a change to a constant or a shift shows up here rather than as a run that
 * no longer repeats.
 */
import { describe, expect, it } from 'vitest';
import { hashTokens, mix32, mulberry32 } from '../../../src/platform/prng.js';

const draws = (seed: number, n: number): number[] => {
  const random = mulberry32(seed);
  return Array.from({ length: n }, () => random());
};

describe('mulberry32', () => {
  it('gives the reference sequence for a seed', () => {
    expect(draws(0, 3)).toEqual([0.26642920868471265, 0.0003297457005828619, 0.2232720274478197]);
    expect(draws(42, 3)).toEqual([0.6011037519201636, 0.44829055899754167, 0.8524657934904099]);
  });

  it('repeats exactly for the same seed, and independent generators do not share state', () => {
    const a = mulberry32(7);
    const b = mulberry32(7);
    const first = a();
    expect(b()).toBe(first);
    a();
    a();
    expect(draws(7, 50)).toEqual(draws(7, 50));
    expect(draws(7, 50)).not.toEqual(draws(8, 50));
  });

  it('takes the seed as an unsigned 32-bit integer (negative, fractional and wider seeds wrap)', () => {
    expect(draws(-1, 5)).toEqual(draws(0xffffffff, 5));
    expect(draws(2 ** 32 + 5, 5)).toEqual(draws(5, 5));
    expect(draws(5.9, 5)).toEqual(draws(5, 5));
  });

  it('stays in [0, 1) and spreads evenly over ten buckets', () => {
    const values = draws(12345, 20_000);
    const buckets = new Array<number>(10).fill(0);
    for (const v of values) buckets[Math.floor(v * 10)]!++;
    expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...values)).toBeLessThan(1);
    // 2000 expected per bucket; the standard deviation is about 42.
    for (const count of buckets) expect(Math.abs(count - 2000)).toBeLessThan(250);
    expect(new Set(values).size).toBeGreaterThan(19_990);
  });
});

describe('mix32', () => {
  it('gives reference values, unsigned 32-bit', () => {
    expect(mix32(1, 2)).toBe(232174035);
    expect(mix32(2, 1)).toBe(2117216093);
    for (const [a, b] of [
      [0xffffffff, 0xffffffff],
      [-5, -7],
      [2 ** 31, 1],
    ]) {
      const h = mix32(a!, b!);
      expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true);
    }
  });

  it('depends on both inputs and their order', () => {
    expect(mix32(1, 2)).not.toBe(mix32(2, 1));
    expect(mix32(1, 2)).not.toBe(mix32(1, 3));
    expect(mix32(1, 2)).not.toBe(mix32(0, 2));
  });

  it('avalanches: one flipped input bit changes about half the output bits', () => {
    const popcount = (x: number): number => x.toString(2).replaceAll('0', '').length;
    let flipped = 0;
    let trials = 0;
    for (let a = 0; a < 32; a++) {
      for (let bit = 0; bit < 32; bit++) {
        const base = mix32(a * 2654435761, 99);
        flipped += popcount((base ^ mix32(a * 2654435761, 99 ^ (1 << bit))) >>> 0);
        flipped += popcount((base ^ mix32((a * 2654435761) ^ (1 << bit), 99)) >>> 0);
        trials += 2;
      }
    }
    const mean = flipped / trials;
    expect(mean).toBeGreaterThan(14);
    expect(mean).toBeLessThan(18);
  });
});

describe('hashTokens', () => {
  it('gives reference values', () => {
    expect(hashTokens([])).toBe(2872998923);
    expect(hashTokens([1, 2, 3])).toBe(2013064925);
  });

  it('is the same for equal sequences whatever their container', () => {
    expect(hashTokens(Uint32Array.of(1, 2, 3))).toBe(hashTokens([1, 2, 3]));
    expect(hashTokens({ length: 3, 0: 1, 1: 2, 2: 3 })).toBe(hashTokens([1, 2, 3]));
  });

  it('depends on order, values and length (trailing zeros included)', () => {
    const hashes = [[], [0], [0, 0], [1, 2, 3], [3, 2, 1], [1, 2], [1, 2, 3, 0], [1, 2, 4]].map(hashTokens);
    expect(new Set(hashes).size).toBe(hashes.length);
  });
});
