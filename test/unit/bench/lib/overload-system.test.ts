/** What the overload scenarios share: the flags a tuning run gives instead of the built-in ones, and the progress bar. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { argsOr, BEST, ProgressBar } from '../../../../bench/lib/overload-system.js';

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
