/** The overload scenarios' pure part: a point's loads per class and per tenant, the figures read from summaries, and the goals' verdicts. */
import { describe, expect, it } from 'vitest';
import {
  classesVerdict,
  classLoads,
  HIGH_PRIORITY,
  loadFigures,
  LOW_PRIORITY,
  politeDrop,
  tenantLoads,
  tenantsVerdict,
  type ClassesRun,
  type TenantsRun,
} from '../../../../bench/lib/overload-scenarios.js';
import type { LoadSummary } from '../../../../src/tools/load/stats.js';

const none = { p50: null, p90: null, p99: null };

/** A summary of `sent` first attempts, `good` of them within the SLO, `rejected` refused (`capped` of those by 429). */
function summary(sent: number, good: number, rejected = 0, capped?: number, ttft: { p50: number; p99: number } | undefined = undefined): LoadSummary {
  return {
    target: 'http://h/v1/chat/completions',
    sent,
    completed: sent - rejected,
    rejected,
    ...(capped !== undefined && { tenant_capped: capped }),
    errors: {},
    retries: 0,
    ttft_ms: ttft === undefined ? none : { p50: ttft.p50, p90: ttft.p99, p99: ttft.p99 },
    itl_ms: none,
    time_to_reject_ms: none,
    slo: { ttft_ms: 500, itl_ms: 50, good, goodput_per_s: good / 10 },
    output_tokens: 0,
    tokens_per_s: 0,
    requests_per_s: 0,
    duration_s: 10,
  };
}

describe('classLoads', () => {
  it('splits the total rate between the high and the low class, high first, each with its priority', () => {
    const [high, low] = classLoads(56, 0.2);
    expect(high).toEqual({ name: 'high', priority: HIGH_PRIORITY, rate: expect.closeTo(11.2, 9) });
    expect(low).toEqual({ name: 'low', priority: LOW_PRIORITY, rate: expect.closeTo(44.8, 9) });
    expect(HIGH_PRIORITY).toBeLessThan(LOW_PRIORITY); // lower runs sooner
  });

  it('refuses a share outside (0, 1) and a rate that is not positive', () => {
    expect(() => classLoads(10, 0)).toThrow(RangeError);
    expect(() => classLoads(10, 1)).toThrow(RangeError);
    expect(() => classLoads(0, 0.2)).toThrow(RangeError);
  });
});

describe('tenantLoads', () => {
  it('gives each polite tenant an equal part of the polite share of C, and the noisy one its factor of that', () => {
    const loads = tenantLoads({ capacity: 14, politeShare: 0.8, politeTenants: 4, noisyFactor: 10, withNoisy: true });
    expect(loads.map((l) => l.tenant)).toEqual(['polite-1', 'polite-2', 'polite-3', 'polite-4', 'noisy']);
    for (const l of loads.slice(0, 4)) expect(l).toEqual({ tenant: l.tenant, polite: true, rate: expect.closeTo(2.8, 9) });
    expect(loads[4]).toEqual({ tenant: 'noisy', polite: false, rate: expect.closeTo(28, 9) });
  });

  it('leaves the noisy tenant out of the run without it, the polite ones unchanged', () => {
    const mix = { capacity: 10, politeShare: 0.8, politeTenants: 2, noisyFactor: 10 };
    expect(tenantLoads({ ...mix, withNoisy: false })).toEqual(tenantLoads({ ...mix, withNoisy: true }).slice(0, 2));
  });

  it('refuses no polite tenant, a fractional count, or a share that is not positive', () => {
    const mix = { capacity: 10, politeShare: 0.8, politeTenants: 4, noisyFactor: 10, withNoisy: true };
    expect(() => tenantLoads({ ...mix, politeTenants: 0 })).toThrow(RangeError);
    expect(() => tenantLoads({ ...mix, politeTenants: 1.5 })).toThrow(RangeError);
    expect(() => tenantLoads({ ...mix, politeShare: 0 })).toThrow(RangeError);
  });
});

describe('loadFigures', () => {
  it('reads goodput per second of arrivals and shares of what was offered, 429 apart from 529', () => {
    const f = loadFigures([summary(100, 60, 30, 10, { p50: 40, p99: 300 })], 10);
    expect(f).toEqual({ offered: 100, good: 60, goodputPerS: 6, goodShare: 0.6, share529: 0.2, share429: 0.1, ttftP50: 40, ttftP99: 300 });
  });

  it('adds the counts of several runs, and takes the highest of their TTFT percentiles', () => {
    const f = loadFigures([summary(50, 50, 0, 0, { p50: 40, p99: 90 }), summary(50, 20, 20, undefined, { p50: 45, p99: 400 }), summary(0, 0)], 5);
    expect(f).toMatchObject({ offered: 100, good: 70, goodputPerS: 14, goodShare: 0.7, share529: 0.2, share429: 0, ttftP50: 45, ttftP99: 400 });
  });

  it('counts first attempts as offered: retries are not offered twice', () => {
    expect(loadFigures([{ ...summary(12, 9, 3), retries: 2 }], 1)).toMatchObject({ offered: 10, goodShare: 0.9 });
  });

  it('has NaN shares and percentiles when nothing was offered or nothing admitted', () => {
    const f = loadFigures([summary(0, 0)], 10);
    expect(f.goodShare).toBeNaN();
    expect(f.share529).toBeNaN();
    expect(f.ttftP99).toBeNaN();
    expect(loadFigures([], 10).ttftP50).toBeNaN();
  });
});

const classesRun = (config: string, multiple: number, repeat: number, high: [number, number]): ClassesRun => ({
  config,
  multiple,
  repeat,
  classes: { high: summary(high[0], high[1]), low: summary(100, 10, 80) },
});

describe('classesVerdict', () => {
  it('is met when the high class got >= 99% of its offered at every point up to 4x, pooled over repeats; 8x is not judged', () => {
    const runs = [
      classesRun('p', 1, 0, [100, 100]),
      classesRun('p', 4, 0, [100, 98]),
      classesRun('p', 4, 1, [100, 100]), // pooled 198/200 = 99%
      classesRun('p', 8, 0, [100, 50]),
      classesRun('other', 1, 0, [100, 0]),
    ];
    const v = classesVerdict(runs, 'p', 10);
    expect(v.met).toBe(true);
    expect(v.text).toBe('p: high-priority goodput / offered 1x 100.0% (100/100), 4x 99.0% (198/200); goal >= 99% at every point up to 4x C: MET');
  });

  it('is missed at the lowest point below the target, naming it', () => {
    const runs = [classesRun('b', 0.5, 0, [20, 20]), classesRun('b', 2, 0, [100, 90]), classesRun('b', 4, 0, [100, 50])];
    const v = classesVerdict(runs, 'b', 10);
    expect(v.met).toBe(false);
    expect(v.text).toMatch(/MISSED \(lowest 50\.0% at 4x\)$/);
  });

  it('is missed, not met, when a point offered nothing, and not judged without a point up to 4x', () => {
    expect(classesVerdict([classesRun('b', 1, 0, [0, 0])], 'b', 10).met).toBe(false);
    const v = classesVerdict([classesRun('b', 8, 0, [10, 10])], 'b', 10);
    expect(v).toEqual({ met: false, text: 'b: no point at or below 4x C was run, so the goal is not judged' });
  });
});

const tenantsRun = (config: string, withNoisy: boolean, repeat: number, politeGood: number[]): TenantsRun => ({
  config,
  withNoisy,
  repeat,
  tenants: [
    ...politeGood.map((good, i) => ({ tenant: `polite-${i + 1}`, polite: true, summary: summary(60, good) })),
    ...(withNoisy ? [{ tenant: 'noisy', polite: false, summary: summary(600, 100, 500, 400) }] : []),
  ],
});

describe('politeDrop and tenantsVerdict', () => {
  const runs = [
    tenantsRun('fair', false, 0, [50, 50]),
    tenantsRun('fair', true, 0, [49, 49]), // -2%
    tenantsRun('fair', false, 1, [50, 50]),
    tenantsRun('fair', true, 1, [48, 48]), // -4%
    tenantsRun('unfair', false, 0, [50, 50]),
    tenantsRun('unfair', true, 0, [30, 30]), // -40%
  ];

  it("pools the polite tenants' good requests over repeats, and pairs each repeat's runs for the spread", () => {
    const { pooled, perRepeat } = politeDrop(runs, 'fair');
    expect(pooled).toBeCloseTo(0.03, 9);
    expect(perRepeat).toMatchObject({ n: 2, min: expect.closeTo(0.02, 9), max: expect.closeTo(0.04, 9) });
  });

  it('is met under 5% and missed at or above it, saying by how much', () => {
    expect(tenantsVerdict(runs, 'fair')).toEqual({
      met: true,
      text: "fair: the polite tenants' goodput drops by 3.0% with the noisy tenant (per repeat 3.0% [2.0%..4.0%]); goal < 5.0%: MET",
    });
    expect(tenantsVerdict(runs, 'unfair')).toEqual({
      met: false,
      text: "unfair: the polite tenants' goodput drops by 40.0% with the noisy tenant; goal < 5.0%: MISSED",
    });
  });

  it('is not judged without a run without the noisy tenant', () => {
    expect(tenantsVerdict([tenantsRun('x', true, 0, [10])], 'x')).toMatchObject({ met: false, text: expect.stringMatching(/not judged$/) });
  });
});
