/**
 * The soak's bookkeeping (soak-main.ts): what one run of the suite says of itself (vitest's JSON
 * report), failures per test across runs, and the table printed at the end. Pure, so it is
 * unit-tested apart from the runs themselves.
 */

/** One run of the suite, as its JSON report (or its absence) tells it. */
export interface RunOutcome {
  readonly run: number;
  readonly passed: number;
  readonly failed: number;
  readonly seconds: number;
  /** `file > test name` of every failed test; a file that failed to load counts as one entry for the file. */
  readonly failures: readonly string[];
  /** Set when the run gave no usable report (killed, crashed, timed out): the run counts as failed. */
  readonly broken?: string;
}

interface VitestReport {
  readonly numPassedTests?: number;
  readonly numFailedTests?: number;
  readonly testResults?: readonly {
    readonly name: string;
    readonly status?: string;
    readonly message?: string;
    readonly assertionResults?: readonly { readonly status: string; readonly fullName?: string; readonly title: string }[];
  }[];
}

/** Reads vitest's `--reporter=json` output; file names are made relative to `root`. */
export function outcomeOf(run: number, seconds: number, reportText: string | undefined, root: string): RunOutcome {
  if (reportText === undefined) return { run, passed: 0, failed: 0, seconds, failures: [], broken: 'no report written' };
  let report: VitestReport;
  try {
    report = JSON.parse(reportText) as VitestReport;
  } catch {
    return { run, passed: 0, failed: 0, seconds, failures: [], broken: 'report is not JSON' };
  }
  const prefix = root.endsWith('/') ? root : `${root}/`;
  const failures: string[] = [];
  for (const file of report.testResults ?? []) {
    const name = file.name.startsWith(prefix) ? file.name.slice(prefix.length) : file.name;
    const failedTests = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
    for (const test of failedTests) failures.push(`${name} > ${test.fullName ?? test.title}`);
    if (failedTests.length === 0 && file.status === 'failed') failures.push(`${name} > (the file failed: ${firstLine(file.message)})`);
  }
  return { run, passed: report.numPassedTests ?? 0, failed: Math.max(report.numFailedTests ?? 0, failures.length), seconds, failures };
}

const firstLine = (text: string | undefined): string => (text ?? 'no message').split('\n')[0]!.slice(0, 120);

/** Each failing test with the runs it failed in, most failures first. */
export function failuresPerTest(outcomes: readonly RunOutcome[]): { test: string; runs: number[] }[] {
  const byTest = new Map<string, number[]>();
  for (const outcome of outcomes) for (const test of outcome.failures) byTest.set(test, [...(byTest.get(test) ?? []), outcome.run]);
  return [...byTest.entries()].map(([test, runs]) => ({ test, runs })).sort((a, b) => b.runs.length - a.runs.length || a.test.localeCompare(b.test));
}

/** The closing report: one line per run, then the failures per test (Markdown tables). */
export function soakReport(outcomes: readonly RunOutcome[], setting: string): string {
  const lines = [`Soak: ${outcomes.length} run(s) of the suite, ${setting}`, '', '| run | passed | failed | seconds | note |', '|---:|---:|---:|---:|---|'];
  for (const o of outcomes) lines.push(`| ${o.run} | ${o.passed} | ${o.failed} | ${o.seconds.toFixed(0)} | ${o.broken ?? ''} |`);
  const perTest = failuresPerTest(outcomes);
  lines.push('');
  if (perTest.length === 0) {
    lines.push(outcomes.some((o) => o.broken) ? 'No test failed, but some runs gave no report (see the note).' : 'No test failed in any run.');
  } else {
    lines.push('| failures | runs | test |', '|---:|---|---|');
    for (const { test, runs } of perTest) lines.push(`| ${runs.length}/${outcomes.length} | ${runs.join(', ')} | ${test.replaceAll('|', '\\|')} |`);
  }
  return `${lines.join('\n')}\n`;
}

/** True when every run reported and nothing failed. */
export const soakPassed = (outcomes: readonly RunOutcome[]): boolean => outcomes.every((o) => o.broken === undefined && o.failed === 0);
