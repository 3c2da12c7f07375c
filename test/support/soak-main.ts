/**
 * `npm run test:soak -- [--runs 5] [--parallel 2] [--load] [--node PATH] [-- vitest filters]`:
 * runs the test suite again and again, optionally several at once and beside a CPU hog on every
 * core, and prints a table of failures per test. A test that fails once here is flaky: it races
 * the machine instead of waiting for what it asserts (docs/testing.md).
 *
 * The suite is vitest on test/vitest.config.ts, as `npm test` runs it, without coverage; dist/ is
 * built once first (integration tests run the compiled CLI). Exits 0 only when every run passed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { outcomeOf, soakPassed, soakReport, type RunOutcome } from './soak-tally.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HELP = `Usage: npm run test:soak -- [options] [-- vitest file filters]

Runs the test suite several times and prints the failures per test.

  --runs N       runs in all (default 3)
  --parallel K   runs at once, each a whole suite (default 1; 2 is "two CI runs on one machine")
  --load         a busy loop on every core beside the runs (as many as the machine has cores)
  --node PATH    the Node binary that runs vitest and every process the tests start (default: this one)
  --timeout-s S  a run still going after S seconds is killed and counted as broken (default 1800)
  --help         this text`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    runs: { type: 'string', default: '3' },
    parallel: { type: 'string', default: '1' },
    load: { type: 'boolean', default: false },
    node: { type: 'string', default: process.execPath },
    'timeout-s': { type: 'string', default: '1800' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const runs = Number(values.runs);
const parallel = Number(values.parallel);
const timeoutS = Number(values['timeout-s']);
const problems = [
  ...(Number.isInteger(runs) && runs >= 1 && runs <= 1000 ? [] : ['--runs must be an integer from 1 to 1000']),
  ...(Number.isInteger(parallel) && parallel >= 1 && parallel <= 8 ? [] : ['--parallel must be an integer from 1 to 8']),
  ...(timeoutS > 0 ? [] : ['--timeout-s must be > 0']),
];
if (problems.length > 0) {
  for (const problem of problems) console.error(`test:soak: ${problem}`);
  process.exit(2);
}

const scratch = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-soak-'));
const hogs: ChildProcess[] = [];
const suites = new Set<ChildProcess>();
const stopAll = (): void => {
  for (const child of hogs) child.kill('SIGKILL');
  for (const child of suites) killGroup(child);
};
process.on('SIGINT', () => {
  stopAll();
  process.exit(130);
});

const build = spawnSync(values.node, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
if (build.status !== 0) {
  console.error('test:soak: the build (tsc) failed');
  process.exit(1);
}

if (values.load) {
  // A busy loop per core, at the same priority as the suite: what a neighbour on a shared machine does.
  for (let i = 0; i < availableParallelism(); i++) hogs.push(spawn(values.node, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

/** Kills a suite's whole process group: vitest, its workers and every process its tests started. */
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    child.kill('SIGKILL'); // the group is gone already
  }
}

/** One whole suite; resolves with what its report says (or that there was none). */
function runSuite(run: number): Promise<RunOutcome> {
  const report = join(scratch, `run-${run}.jsonl`);
  const started = Date.now();
  const args = [
    join(ROOT, 'node_modules/vitest/vitest.mjs'),
    'run',
    '--config',
    'test/vitest.config.ts',
    '--reporter=./test/support/soak-reporter.ts',
    ...positionals,
  ];
  // The tests start processes with process.execPath; PATH's node is this one too, for scripts that ask for `node`.
  const env = { ...process.env, DYN_SOAK_REPORT: report, PATH: `${join(values.node, '..')}:${process.env.PATH ?? ''}` };
  return new Promise((resolve) => {
    // A process group of its own, so a kill takes the processes its tests started with it.
    const child = spawn(values.node, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    suites.add(child);
    let stderrTail = '';
    child.stderr.on('data', (chunk: Buffer) => (stderrTail = (stderrTail + chunk.toString()).slice(-2000)));
    const timer = setTimeout(() => killGroup(child), timeoutS * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      suites.delete(child);
      let text: string | undefined;
      try {
        text = readFileSync(report, 'utf8');
      } catch {
        text = undefined;
      }
      const outcome = outcomeOf(run, (Date.now() - started) / 1000, text);
      const why = signal !== null ? `killed by ${signal} (past --timeout-s)` : `exited ${code}: ${stderrTail.trim().split('\n').pop() ?? ''}`;
      resolve(outcome.broken !== undefined ? { ...outcome, broken: `${outcome.broken}: ${why}` } : outcome);
    });
  });
}

const setting = `${parallel} at a time${values.load ? `, beside ${hogs.length} busy loop(s)` : ''}, Node ${spawnSync(values.node, ['--version']).stdout.toString().trim()}`;
console.error(`test:soak: ${runs} run(s), ${setting}`);
const outcomes: RunOutcome[] = [];
let next = 1;
async function worker(): Promise<void> {
  while (next <= runs) {
    const run = next++;
    console.error(`test:soak: run ${run}/${runs} started`);
    const outcome = await runSuite(run);
    outcomes.push(outcome);
    const failures = outcome.failures.length > 0 ? `: ${outcome.failures.join('; ')}` : '';
    console.error(
      `test:soak: run ${run}/${runs} done in ${outcome.seconds.toFixed(0)} s, ${outcome.passed} passed, ${outcome.failed} failed${outcome.broken ? ` (${outcome.broken})` : ''}${failures}`,
    );
  }
}
try {
  await Promise.all(Array.from({ length: Math.min(parallel, runs) }, () => worker()));
} finally {
  stopAll();
  rmSync(scratch, { recursive: true, force: true });
}
outcomes.sort((a, b) => a.run - b.run);
process.stdout.write(soakReport(outcomes, setting));
process.exit(soakPassed(outcomes) ? 0 : 1);
