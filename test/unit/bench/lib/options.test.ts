// The benchmark's command line: --help, and a bad option named as a usage error (exit 2).
import { describe, expect, it } from 'vitest';
import { BENCH_USAGE, BenchUsageError, parseOptions } from '../../../../bench/lib/options.js';

const KNOWN = ['unary', 'streaming'];

describe('bench parseOptions', () => {
  it('answers help for --help or -h, whatever else is given', () => {
    expect(parseOptions(['--help'], KNOWN)).toBe('help');
    expect(parseOptions(['--rounds', '0', '-h'], KNOWN)).toBe('help');
    for (const flag of ['--quick', '--rounds', '--scenario', '--baseline', '--time-limit-min']) expect(BENCH_USAGE).toContain(flag);
  });

  it('names a bad or unknown option as a usage error', () => {
    expect(() => parseOptions(['--bogus'], KNOWN)).toThrow(BenchUsageError);
    expect(() => parseOptions(['--rounds', '0', '--scenario', 'unary'], KNOWN)).toThrow(/--rounds must be an integer 1\.\.50, got 0/);
    expect(() => parseOptions(['--scenario', 'memory'], KNOWN)).toThrow(/unknown scenario "memory" \(known: unary, streaming\)/);
  });

  it('reads --upstream-connections as a list of K, one row each, and refuses a K out of 1..64 or named twice', () => {
    const only = ['--scenario', 'unary'];
    expect(parseOptions([...only, '--upstream-connections', '1,4', '--upstream-connections', '8'], KNOWN)).toMatchObject({ upstreamConnections: [1, 4, 8] });
    expect(parseOptions(only, KNOWN)).toMatchObject({ upstreamConnections: [] });
    expect(() => parseOptions([...only, '--upstream-connections', '0,4'], KNOWN)).toThrow(/--upstream-connections takes integers 1\.\.64, got 0,4/);
    expect(() => parseOptions([...only, '--upstream-connections', 'many'], KNOWN)).toThrow(BenchUsageError);
    expect(() => parseOptions([...only, '--upstream-connections', '4,4'], KNOWN)).toThrow(/names a K twice/);
    expect(BENCH_USAGE).toContain('--upstream-connections');
  });

  it('reads the defaults and --quick', () => {
    const full = parseOptions(['--scenario', 'unary'], KNOWN);
    const quick = parseOptions(['--quick', '--scenario', 'unary'], KNOWN);
    expect(full).toMatchObject({ rounds: 5, quick: false, scenarios: ['unary'], timeLimitMin: 45 });
    expect(quick).toMatchObject({ rounds: 1, quick: true, profile: false });
  });
});
