/**
 * The benchmark's arithmetic, without running anything: rotation of the target order, paired
 * per-round figures and their spread, the warm-up's settle rule, the per-call / per-message solve,
 * and cutting a CPU profile to a window. A wrong figure here would look trustworthy in the report.
 */
import { describe, expect, it } from 'vitest';
import type { CpuProfile } from '../../../bench/lib/profile.js';
import { digestProfile } from '../../../bench/lib/profile.js';
import { settleRule, wantsAnotherSlice, warmUp } from '../../../bench/lib/settle.js';
import { evaluateGoals } from '../../../bench/report/goals.js';
import { spread } from '../../../bench/lib/stats.js';
import { rotation } from '../../../bench/scenarios/rounds.js';
import { solveCallAndMessage } from '../../../bench/scenarios/streaming.js';
import { pairRows, pairScenario, summarizeRows } from '../../../bench/scenarios/summary.js';
import { newResult, type Roster, type Row } from '../../../bench/scenarios/types.js';

const row = (target: string, values: (number | null)[]): Row => ({
  target,
  rounds: values.map((v) => (v === null ? null : { x: v })),
  summary: {},
});

describe('rounds', () => {
  it('start round r at target r mod T', () => {
    const t = ['a', 'b', 'c'];
    expect([0, 1, 2, 3].map((r) => rotation(t, r).join(''))).toEqual(['abc', 'bca', 'cab', 'abc']);
  });
});

describe('paired figures', () => {
  it('divide or subtract within each round, then take median [min..max] of those', () => {
    const a = row('sidecar', [10, 30, 12, null]);
    const b = row('haproxy', [5, 10, 4, 2]);
    const ratio = pairRows(a, b, { metric: 'x', op: 'ratio', label: 'x' });
    expect(ratio.perRound).toEqual([2, 3, 3, null]);
    expect(ratio.summary).toEqual({ median: 3, min: 2, max: 3, n: 3 });
    // Not median(a) / median(b) = 12 / 4.5.
    const diff = pairRows(a, b, { metric: 'x', op: 'diff', label: 'x' });
    expect(diff.perRound).toEqual([5, 20, 8, null]);
    expect(diff.summary.median).toBe(8);
  });

  it('spread ignores missing rounds', () => {
    expect(spread([null, 4, undefined, 2, NaN])).toEqual({ median: 3, min: 2, max: 4, n: 2 });
    expect(spread([]).n).toBe(0);
  });
});

describe('warm-up', () => {
  const rule = settleRule(false);

  it('goes on until three consecutive slices agree within 5%, or the cap', () => {
    expect(wantsAnotherSlice([41.2, 28.0], rule, true)).toBe(true);
    expect(wantsAnotherSlice([41.2, 28.0, 25.1, 24.9], rule, true)).toBe(true);
    expect(wantsAnotherSlice([41.2, 28.0, 25.1, 24.9, 24.6], rule, true)).toBe(false);
    expect(wantsAnotherSlice([13.0, 12.5, 11.8], rule, true)).toBe(true);
    expect(wantsAnotherSlice([9, 10, 9, 10, 9, 10, 9, 10], rule, true)).toBe(false);
  });

  it('without a proxy to measure runs the minimum only', () => {
    expect(wantsAnotherSlice([NaN, NaN], rule, false)).toBe(true);
    expect(wantsAnotherSlice([NaN, NaN, NaN], rule, false)).toBe(false);
  });

  it('runs slices until they settle, and says whether they did', async () => {
    const series = [41.2, 28.0, 25.1, 24.9, 24.6, 99, 99];
    let i = 0;
    expect(await warmUp(rule, true, () => Promise.resolve(series[i++]!))).toEqual({ slices: [41.2, 28.0, 25.1, 24.9, 24.6], settled: true });
    let n = 0;
    const noisy = await warmUp(rule, true, () => Promise.resolve(n++ % 2 ? 10 : 9));
    expect(noisy.slices).toHaveLength(rule.maxSlices);
    expect(noisy.settled).toBe(false);
    expect(await warmUp(rule, false, () => Promise.resolve(NaN))).toEqual({ slices: [NaN, NaN, NaN], settled: null });
  });
});

describe('per-call and per-message cost', () => {
  it('solves CPU = calls * c + messages * m from two runs', () => {
    const c = 100; // us per call
    const m = 5; // us per message
    const run = (calls: number, messages: number) => ({ callsCompleted: calls, messages, cpuS: (calls * c + messages * m) / 1e6 });
    const solved = solveCallAndMessage(run(1024, 51_200) as never, run(102, 51_200) as never);
    expect(solved.usPerCall).toBeCloseTo(c, 6);
    expect(solved.usPerMsg).toBeCloseTo(m, 6);
  });
});

describe('CPU profile window', () => {
  it('counts only the samples taken inside the window', () => {
    // Root -> busy (id 2) and idle (id 3); a sample every 1,000 us from t = 10,000 us.
    const profile: CpuProfile = {
      nodes: [
        { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: 0 }, children: [2, 3] },
        { id: 2, callFrame: { functionName: 'busy', url: 'file:///x/dist/a.js', lineNumber: 0 } },
        { id: 3, callFrame: { functionName: '(idle)', url: '', lineNumber: 0 } },
      ],
      samples: [2, 2, 3, 3, 2, 2, 2, 3],
      timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
      startTime: 10_000,
      endTime: 18_000,
    };
    const all = digestProfile(profile);
    expect(all.samples).toBe(8);
    // Samples at 11,000 .. 18,000 us; the window [14,000, 17,000) holds those at 14, 15, 16 ms.
    const cut = digestProfile(profile, { fromUs: 14_000, toUs: 17_000 });
    expect(cut.samples).toBe(3);
    expect(cut.windowMs).toBe(3);
    expect(cut.busyMs).toBeCloseTo(2, 6); // two busy samples of 1 ms (the first stands for the interval up to the next)
    expect(cut.top[0]?.name).toBe('busy');
  });
});

describe('goals', () => {
  it('judge the median paired ratio against HAProxy and say by how much one is missed', () => {
    const roster: Roster = {
      direct: false,
      haproxy: true,
      nginx: false,
      sidecars: [{ label: 'sidecar', role: 'sidecar', node: 'node', nodeVersion: 'v0', main: 'main.js' }],
    };
    const unary = newResult('unary', 'unary', [], []);
    const cpuRow = (target: string, values: number[]): Row => ({ target, rounds: values.map((v) => ({ cpuUsPerCall: v })), summary: {} });
    unary.rows.push(cpuRow('sidecar', [80, 90, 100]), cpuRow('haproxy', [10, 10, 10]));
    summarizeRows(unary.rows);
    pairScenario(unary, roster, [{ numerators: 'sidecars', denominator: 'haproxy', defs: [{ metric: 'cpuUsPerCall', op: 'ratio', label: 'cpu' }] }], []);
    const goal = evaluateGoals([unary], roster).find((g) => g.id === 'unary-cpu')!;
    // Paired ratios 8, 9, 10: median 9 against the limit of 4x.
    expect(goal.met).toBe(false);
    expect(goal.value).toBe(9);
    expect(goal.margin).toBe('missed by 5.00: needs 56% less CPU per call');
  });
});
