/** The soak's bookkeeping: the soak reporter's lines read into failures, counted per test across runs, and the closing table. */
import { describe, expect, it } from 'vitest';
import { failuresPerTest, outcomeOf, soakPassed, soakReport } from '../../support/soak-tally.js';

const lines = (...objects: object[]): string => objects.map((o) => `${JSON.stringify(o)}\n`).join('');
const DONE = { done: true };

describe('outcomeOf', () => {
  it('names each failed test by its file and full name, and adds up the passed', () => {
    const text = lines({ file: 'test/a.test.ts', passed: 1, failed: ['suite races'] }, { file: 'test/b.test.ts', passed: 3, failed: [] }, DONE);
    expect(outcomeOf(1, 12.5, text)).toEqual({ run: 1, passed: 4, failed: 1, seconds: 12.5, failures: ['test/a.test.ts > suite races'] });
  });

  it('counts a file that failed to load (no test ran) as a failure of that file, with its first message line', () => {
    const outcome = outcomeOf(2, 1, lines({ file: 'test/c.test.ts', passed: 0, failed: [], error: 'Cannot find module x\n  at ...' }, DONE));
    expect(outcome.failures).toEqual(['test/c.test.ts > (the file failed: Cannot find module x)']);
    expect(outcome.failed).toBe(1);
    expect(soakPassed([outcome])).toBe(false);
  });

  it('keeps the failures of a run that did not finish, and marks it broken', () => {
    const outcome = outcomeOf(3, 1800, lines({ file: 'test/a.test.ts', passed: 2, failed: ['hangs later'] }));
    expect(outcome.failures).toEqual(['test/a.test.ts > hangs later']);
    expect(outcome.broken).toBe('the run did not finish');
    expect(soakPassed([outcomeOf(3, 5, lines({ file: 'test/a.test.ts', passed: 2, failed: [] }))]), 'a clean but unfinished run').toBe(false);
  });

  it('marks a run with no report, or a line that is not JSON, as broken', () => {
    expect(outcomeOf(4, 5, undefined).broken).toBe('no report written');
    expect(outcomeOf(4, 5, '{"file": "x"').broken).toBe('a report line is not JSON');
  });
});

describe('failuresPerTest and soakReport', () => {
  const runs = [
    outcomeOf(1, 300, lines({ file: 'test/a.test.ts', passed: 10, failed: ['x', 'y'] }, DONE)),
    outcomeOf(2, 310, lines({ file: 'test/a.test.ts', passed: 11, failed: ['x'] }, DONE)),
    outcomeOf(3, 305, lines({ file: 'test/a.test.ts', passed: 12, failed: [] }, DONE)),
  ];

  it('lists each failing test with the runs it failed in, the most failing first', () => {
    expect(failuresPerTest(runs)).toEqual([
      { test: 'test/a.test.ts > x', runs: [1, 2] },
      { test: 'test/a.test.ts > y', runs: [1] },
    ]);
  });

  it('prints one row per run and one per failing test, and passes only a clean soak', () => {
    const text = soakReport(runs, '1 at a time');
    expect(text).toContain('| 2 | 11 | 1 | 310 |  |');
    expect(text).toContain('| 2/3 | 1, 2 | test/a.test.ts > x |');
    expect(soakPassed(runs)).toBe(false);
    expect(soakPassed([runs[2]!])).toBe(true);
    expect(soakReport([runs[2]!], 'quiet')).toContain('No test failed in any run.');
  });
});
