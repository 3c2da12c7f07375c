/** What the overload scenarios share: the flags a tuning run gives instead of the built-in ones, and the progress bar. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { argsOr, BEST, ProgressBar, runProblems } from '../../../../bench/lib/overload-system.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('argsOr', () => {
  it('splits flags given as one string on any whitespace, and keeps the built-in ones when none are given', () => {
    expect(argsOr(' --a 1\t--b  2 ', ['--x'])).toEqual(['--a', '1', '--b', '2']);
    expect(argsOr('', ['--x'])).toEqual([]);
    expect(argsOr(undefined, BEST.sidecar)).toBe(BEST.sidecar);
  });
});

describe('ProgressBar', () => {
  it('draws the share of runs done over 30 columns, redrawn in place, never past full', () => {
    const writes: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((text: string | Uint8Array) => writes.push(String(text)) > 0);
    const bar = new ProgressBar();
    bar.total = 4;
    bar.done = 1;
    bar.show('best at 1x');
    bar.done = 5;
    bar.show('done');
    expect(writes[0]).toMatch(/^\r\[#{8}-{22}\] 1\/4 best at 1x\s*$/);
    expect(writes[1]).toMatch(/^\r\[#{30}\] 5\/4 done/);
  });
});

describe('runProblems', () => {
  const good = { configs: ['best'], known: ['best', 'best+priority'], pointS: 15, repeats: 3, slo: { sloTtftMs: 500, sloItlMs: 50 }, seed: 1, graceS: 5 };

  it('finds nothing wrong with sane options, and names each bad one', () => {
    expect(runProblems(good)).toEqual([]);
    expect(runProblems({ ...good, configs: ['best', 'nope'], repeats: 0, seed: -1 })).toEqual([
      '--configs must be among best, best+priority',
      '--repeats must be an integer >= 1',
      '--seed must be an integer >= 0',
    ]);
    expect(runProblems({ ...good, pointS: 0.5, slo: { sloTtftMs: 0, sloItlMs: 50 }, graceS: -1 })).toHaveLength(3);
  });
});
