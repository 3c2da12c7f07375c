// The adaptive limit (gradient2 on the time to first token): it holds at the ceiling while the
// first token comes on time, shrinks while it comes late, grows back, and never leaves its bounds.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { GradientLimit } from '../../../../src/sidecar/admission/gradient-limit.js';

const windows = (g: GradientLimit, count: number, ms: number): number[] => {
  const limits: number[] = [];
  for (let w = 0; w < count; w++) {
    for (let i = 0; i < 10; i++) g.sample(ms);
    limits.push(g.limit);
  }
  return limits;
};

describe('GradientLimit', () => {
  it('starts at the ceiling and stays there while the first token comes in its usual time', () => {
    const g = new GradientLimit({ floor: 2, ceiling: 32 });
    expect(g.limit).toBe(32);
    expect(windows(g, 50, 40)).toEqual(Array.from({ length: 50 }, () => 32));
  });

  it('shrinks, window after window, when the first token comes three times later than usual', () => {
    const g = new GradientLimit({ floor: 2, ceiling: 32 });
    windows(g, 5, 40);
    const late = windows(g, 10, 120);
    expect(late[0]).toBeLessThan(32);
    for (let i = 1; i < late.length; i++) expect(late[i]).toBeLessThanOrEqual(late[i - 1]!);
    // About a tenth a window at the steepest (gradient 0.5, smoothing 0.2), less as the long mean follows.
    expect(late.at(-1)).toBeLessThanOrEqual(24);
  });

  it('takes a lasting slowdown as the new usual time, over its long window (gradient2), having halved the limit meanwhile', () => {
    const g = new GradientLimit({ floor: 6, ceiling: 32 });
    windows(g, 5, 40);
    const slow = windows(g, 300, 400);
    expect(Math.min(...slow)).toBeLessThan(16);
    expect(slow.at(-1)).toBe(32);
  });

  it('tolerates a first token up to 1.5 times its usual time', () => {
    const g = new GradientLimit({ floor: 2, ceiling: 32 });
    windows(g, 5, 40);
    expect(windows(g, 20, 58).at(-1)).toBe(32);
  });

  it('grows back once the first token is on time again', () => {
    const g = new GradientLimit({ floor: 2, ceiling: 32 });
    windows(g, 5, 40);
    const low = windows(g, 30, 200).at(-1)!;
    const recovered = windows(g, 200, 40);
    expect(recovered.at(-1)!).toBeGreaterThan(low);
    expect(recovered.at(-1)).toBe(32);
  });

  it('changes only at the end of a window, and says when it did', () => {
    const g = new GradientLimit({ floor: 1, ceiling: 16, windowSamples: 4 });
    for (let i = 0; i < 4; i++) g.sample(10);
    const changes = [10_000, 10_000, 10_000, 10_000].map((ms) => g.sample(ms));
    expect(changes).toEqual([false, false, false, true]);
    expect(g.limit).toBeLessThan(16);
  });

  it('ignores samples that are not a time, and keeps within new bounds', () => {
    const g = new GradientLimit({ floor: 1, ceiling: 16, windowSamples: 1 });
    expect([g.sample(Number.NaN), g.sample(-5), g.sample(Infinity)]).toEqual([false, false, false]);
    expect(g.limit).toBe(16);
    g.setBounds(4, 8);
    expect(g.limit).toBe(8);
    expect(() => g.setBounds(5, 4)).toThrow(RangeError);
    expect(() => new GradientLimit({ floor: 0, ceiling: 4 })).toThrow(/floor must be an integer >= 1/);
  });

  it.each([3, 17, 2026])('never leaves [floor, ceiling] under random first-token times (seed %i)', (seed) => {
    const random = mulberry32(seed);
    const g = new GradientLimit({ floor: 3, ceiling: 24 });
    for (let i = 0; i < 20_000; i++) {
      g.sample(random() < 0.5 ? 20 + random() * 40 : random() * 2000);
      expect(Number.isInteger(g.limit)).toBe(true);
      expect(g.limit).toBeGreaterThanOrEqual(3);
      expect(g.limit).toBeLessThanOrEqual(24);
    }
  });
});
