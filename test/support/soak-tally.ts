/**
 * The soak's bookkeeping (soak-main.ts): what one run of the suite says of itself (vitest's JSON
 * reporter's lines), failures per test across runs, and the table printed at the end. Pure, so it is
 * unit-tested apart from the runs themselves.
 */

/** One run of the suite, as its report (or its absence) tells it. */
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

/** One line of the soak reporter (soak-reporter.ts): a test file as it ended, or the run's end. */
interface ReportLine {
  readonly file?: string;
  readonly passed?: number;
  readonly failed?: readonly string[];
  readonly error?: string;
  readonly done?: boolean;
}

/** Reads the soak reporter's lines; a run without its closing line is broken, with the failures seen so far. */
export function outcomeOf(run: number, seconds: number, reportText: string | undefined): RunOutcome {
  if (reportText === undefined) return { run, passed: 0, failed: 0, seconds, failures: [], broken: 'no report written' };
  let passed = 0;
  let done = false;
  const failures: string[] = [];
  for (const text of reportText.split('\n')) {
    if (text.trim() === '') continue;
    let line: ReportLine;
    try {
      line = JSON.parse(text) as ReportLine;
    } catch {
      return { run, passed, failed: failures.length, seconds, failures, broken: 'a report line is not JSON' };
    }
    if (line.done === true) done = true;
    passed += line.passed ?? 0;
    for (const test of line.failed ?? []) failures.push(`${line.file} > ${test}`);
    if (line.error !== undefined && (line.failed ?? []).length === 0) failures.push(`${line.file} > (the file failed: ${firstLine(line.error)})`);
  }
  const outcome = { run, passed, failed: failures.length, seconds, failures };
  return done ? outcome : { ...outcome, broken: 'the run did not finish' };
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
