// A count whose events fade with time constant τ: what a connection did in about the last τ.
import { describe, expect, it } from 'vitest';
import { DecayingCount } from '../../../../src/sidecar/proxy/decaying-count.js';

describe('DecayingCount', () => {
  it('counts events that come together at full weight', () => {
    const c = new DecayingCount(1000, 0);
    for (let i = 0; i < 5; i++) c.add(0);
    expect(c.read(0)).toBe(5);
  });

  it('weighs an event e^(-age/τ): 1/e after τ, nearly nothing after 10τ', () => {
    const c = new DecayingCount(1000, 0);
    c.add(0, 100);
    expect(c.read(1000)).toBeCloseTo(100 / Math.E, 6);
    expect(c.read(10_000)).toBeLessThan(0.01);
  });

  it('reads a steady rate r as about r·τ, however long it has run', () => {
    const c = new DecayingCount(1000, 0);
    for (let t = 0; t <= 60_000; t += 10) c.add(t); // 100 per second for a minute
    expect(c.read(60_000)).toBeGreaterThan(95);
    expect(c.read(60_000)).toBeLessThan(106);
  });

  it('decays nothing when the clock steps back, and resumes from the latest time', () => {
    const c = new DecayingCount(1000, 5000);
    c.add(5000, 10);
    expect(c.read(4000)).toBe(10);
    expect(c.read(6000)).toBeCloseTo(10 / Math.E, 6);
  });

  it('refuses a time constant that is not positive', () => {
    expect(() => new DecayingCount(0, 0)).toThrow(RangeError);
    expect(() => new DecayingCount(Number.NaN, 0)).toThrow(/tauMs must be > 0/);
  });
});
