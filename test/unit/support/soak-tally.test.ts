/** The soak's bookkeeping: vitest's JSON report read into failures, counted per test across runs, and the closing table. */
import { describe, expect, it } from 'vitest';
import { failuresPerTest, outcomeOf, soakPassed, soakReport } from '../../support/soak-tally.js';

const ROOT = '/repo';
const report = (files: object[], passed: number, failed: number): string =>
  JSON.stringify({ numPassedTests: passed, numFailedTests: failed, testResults: files });
const file = (name: string, tests: [title: string, status: string][], extra: object = {}): object => ({
  name: `${ROOT}/${name}`,
  status: tests.some(([, s]) => s === 'failed') ? 'failed' : 'passed',
  assertionResults: tests.map(([title, status]) => ({ title, fullName: `suite ${title}`, status })),
  ...extra,
});

describe('outcomeOf', () => {
  it('names each failed test by its file (relative to the checkout) and full name', () => {
    const text = report(
      [
        file('test/a.test.ts', [
          ['ok', 'passed'],
          ['races', 'failed'],
        ]),
        file('test/b.test.ts', [['fine', 'passed']]),
      ],
      2,
      1,
    );
    expect(outcomeOf(1, 12.5, text, ROOT)).toEqual({ run: 1, passed: 2, failed: 1, seconds: 12.5, failures: ['test/a.test.ts > suite races'] });
  });

  it('counts a file that failed to load (no test ran) as a failure of that file, with its first message line', () => {
    const text = report([{ name: `${ROOT}/test/c.test.ts`, status: 'failed', message: 'Cannot find module x\n  at ...', assertionResults: [] }], 0, 0);
    const outcome = outcomeOf(2, 1, text, ROOT);
    expect(outcome.failures).toEqual(['test/c.test.ts > (the file failed: Cannot find module x)']);
    expect(outcome.failed).toBe(1);
    expect(soakPassed([outcome])).toBe(false);
  });

  it('marks a run with no report, or a report that is not JSON, as broken', () => {
    expect(outcomeOf(3, 5, undefined, ROOT).broken).toBe('no report written');
    expect(outcomeOf(3, 5, '{"numPassed', ROOT).broken).toBe('report is not JSON');
    expect(soakPassed([outcomeOf(3, 5, undefined, ROOT)])).toBe(false);
  });
});

describe('failuresPerTest and soakReport', () => {
  const runs = [
    outcomeOf(
      1,
      300,
      report(
        [
          file('test/a.test.ts', [
            ['x', 'failed'],
            ['y', 'failed'],
          ]),
        ],
        10,
        2,
      ),
      ROOT,
    ),
    outcomeOf(2, 310, report([file('test/a.test.ts', [['x', 'failed']])], 11, 1), ROOT),
    outcomeOf(3, 305, report([file('test/a.test.ts', [['x', 'passed']])], 12, 0), ROOT),
  ];

  it('lists each failing test with the runs it failed in, the most failing first', () => {
    expect(failuresPerTest(runs)).toEqual([
      { test: 'test/a.test.ts > suite x', runs: [1, 2] },
      { test: 'test/a.test.ts > suite y', runs: [1] },
    ]);
  });

  it('prints one row per run and one per failing test, and passes only a clean soak', () => {
    const text = soakReport(runs, '1 at a time');
    expect(text).toContain('| 2 | 11 | 1 | 310 |  |');
    expect(text).toContain('| 2/3 | 1, 2 | test/a.test.ts > suite x |');
    expect(soakPassed(runs)).toBe(false);
    expect(soakPassed([runs[2]!])).toBe(true);
    expect(soakReport([runs[2]!], 'quiet')).toContain('No test failed in any run.');
  });
});
