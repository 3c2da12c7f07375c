/**
 * Benchmark entry point: the sidecar against HAProxy (the goals' reference), direct (no proxy)
 * and nginx, every scenario in rounds with the target order rotated each round.
 *
 *   npm run bench                 installs haproxy/nginx/h2load when missing (.ci/setup.sh --bench), builds
 *                                 dist/, fetches Node 24 (.ci/node24.sh), then the default run: unary,
 *                                 streaming, overload, memory; 5 rounds; the sidecar on this Node and on
 *                                 Node 24; CPU profiles. About 14 minutes on 2 cores.
 *   npm run bench -- --quick      the smoke configuration (about 1 minute)
 *   node --import tsx bench/run.ts [options]     the same without the set-up (dist/ must be built)
 *
 * A/B of a code change (paired per-round ratios sidecar / baseline for every goal figure):
 *   npx tsc -p tsconfig.json && node --import tsx bench/run.ts --baseline main --scenario unary,streaming --no-node24 --no-profile
 *
 * Options: `--help` prints them (bench/lib/options.ts holds the text).
 *
 * Output: per scenario a table of median [min..max] over rounds, the warm-up series per target (CPU per
 * unit per slice until three agree), the paired per-round figures (sidecar / HAProxy of the same round;
 * added latency = proxy - direct of the same round) and the method; then the goals (one line per goal per
 * sidecar Node, MET/MISS, judged on the median paired ratio), the A/B section with --baseline, the CPU
 * profiles, and a Markdown summary table for docs/performance.md. Other processes' CPU during each scenario is measured and
 * named. Every process (upstream, proxies, load clients) runs on 127.0.0.1 with OS-picked ports and is
 * stopped before exit.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { planCpus } from './lib/affinity.js';
import { ForeignLoadMeter } from './lib/foreign-load.js';
import { has, machineInfo } from './lib/machine.js';
import { BENCH_USAGE, BenchUsageError, parseOptions } from './lib/options.js';
import { stopAll } from './lib/spawn.js';
import { renderAb } from './report/ab.js';
import { evaluateGoals, renderGoals } from './report/goals.js';
import { renderReadmeTable } from './report/readme-table.js';
import { renderScenario } from './report/table.js';
import { runGate } from './scenarios/gate.js';
import { runMemory } from './scenarios/memory.js';
import { runOverload } from './scenarios/overload.js';
import { runProfiles, renderProfiles, type ProfileSummary } from './scenarios/profile.js';
import { runStreaming } from './scenarios/streaming.js';
import { newResult, type BenchContext, type ScenarioResult } from './scenarios/types.js';
import { runUnary } from './scenarios/unary.js';
import { buildRoster } from './targets/roster.js';

const SCENARIOS: Record<string, (ctx: BenchContext) => Promise<ScenarioResult>> = {
  unary: runUnary,
  streaming: runStreaming,
  overload: runOverload,
  memory: runMemory,
  gate: runGate,
};

const log = (m: string): void => void process.stderr.write(`${m}\n`);

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2), Object.keys(SCENARIOS));
  if (parsed === 'help') {
    process.stdout.write(BENCH_USAGE);
    return 0;
  }
  const options = parsed;
  armHardStop(options.timeLimitMin);
  for (const tool of ['h2load', 'taskset']) if (!has(tool)) throw new Error(`${tool} not found: run \`bash .ci/setup.sh --bench\` (npm run bench does)`);
  const roster = buildRoster(options, log);
  const dir = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-bench-'));
  const plan = planCpus(options.pin);
  const ctx: BenchContext = { options, plan, dir, roster, log };
  const machine = machineInfo(plan);
  log(`bench: ${machine.cores} cores (${machine.cpuModel}), node ${machine.node}, ${plan.description}; temp dir ${dir}`);
  log(`bench: sidecar rows: ${roster.sidecars.map((s) => `${s.label} (${s.nodeVersion})`).join(', ') || 'none'}`);

  const started = Date.now();
  const results: ScenarioResult[] = [];
  for (const id of options.scenarios) {
    log(`bench: scenario ${id} ...`);
    const t0 = Date.now();
    const foreign = new ForeignLoadMeter();
    let result: ScenarioResult;
    try {
      result = await SCENARIOS[id]!(ctx);
    } catch (err) {
      log(`bench: scenario ${id} failed: ${(err instanceof Error ? err.stack : undefined) ?? String(err)}`);
      result = newResult(id, id, [], []);
      result.errors.push((err as Error).message);
    }
    result.durationS = (Date.now() - t0) / 1000;
    result.foreignLoad = foreign.stop();
    results.push(result);
    log(`bench: scenario ${id} took ${result.durationS.toFixed(1)} s`);
  }
  let profiles: ProfileSummary[] = [];
  let profileS = 0;
  if (options.profile && options.scenarios.some((s) => s === 'unary' || s === 'streaming')) {
    const t0 = Date.now();
    profiles = await runProfiles(ctx).catch((err: Error) => {
      log(`bench: profiling failed: ${err.message}`);
      return [];
    });
    profileS = (Date.now() - t0) / 1000;
  }
  const goals = evaluateGoals(results, roster);
  const durationS = (Date.now() - started) / 1000;
  const versions = roster.sidecars.map((s) => `${s.label} on Node ${s.nodeVersion}`).join(', ');

  const ab = renderAb(results, roster);
  const output = [
    `dynamo-sidecar benchmark: ${machine.cores} cores, ${machine.cpuModel}, harness node ${machine.node}, haproxy ${machine.versions['haproxy']}, nginx ${machine.versions['nginx']}, h2load ${machine.versions['h2load']}, commit ${machine.gitCommit}`,
    `sidecar rows: ${versions || 'none'}`,
    `load average at start ${machine.loadAverageAtStart.join(' ')}, at end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (other work on the machine moves absolute figures; paired per-round ratios cancel most of it)`,
    `CPU placement: ${plan.description}; ${options.rounds} rounds per scenario, target order rotated each round${options.quick ? '; QUICK smoke configuration' : ''}`,
    `took ${(durationS / 60).toFixed(1)} min: ${results.map((r) => `${r.id} ${r.durationS.toFixed(0)} s`).join(', ')}${profiles.length ? `, profiles ${profileS.toFixed(0)} s` : ''}`,
    `CPU used by other processes meanwhile (cores; 1.0 = a whole core): ${results.map((r) => `${r.id} ${r.foreignLoad?.cores.toFixed(2) ?? '-'}`).join(', ')}`,
    '',
    ...results.map((r) => `${renderScenario(r)}\n`),
    renderGoals(goals),
    ...(ab ? ['', ab] : []),
    ...(profiles.length ? ['', renderProfiles(profiles)] : []),
    '',
    '== Summary table for docs/performance.md (median paired ratio against HAProxy of the same round, or median figure, over rounds)',
    renderReadmeTable(goals),
  ].join('\n');
  process.stdout.write(`${output}\n`);

  const out = options.out ?? join(dir, `bench-results-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const json = {
    schema: 'dynamo-sidecar-bench/2',
    startedAt: new Date(started).toISOString(),
    durationS,
    machine: { ...machine, loadAverageAtEnd: loadavg().map((l) => Math.round(l * 100) / 100) },
    options: { ...options, out: undefined },
    sidecars: roster.sidecars.map((s) => ({ label: s.label, role: s.role, nodeVersion: s.nodeVersion })),
    scenarios: results,
    goals,
    profiles,
  };
  writeFileSync(out, `${JSON.stringify(json, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`);
  process.stdout.write(`\nJSON results: ${out}\n`);
  // Keep the temp dir only when the JSON went into it (profiles and configs sit beside it).
  if (options.out) rmSync(dir, { recursive: true, force: true });
  // A scenario that measured nothing (no rows, or no round of any row) fails the run.
  return results.some((r) => r.rows.every((row) => !row.rounds.some(Boolean))) ? 1 : 0;
}

function armHardStop(minutes: number): void {
  const timer = setTimeout(() => {
    log(`bench: hard time limit reached (${minutes} min), stopping everything`);
    void stopAll().then(() => process.exit(4));
  }, minutes * 60_000);
  timer.unref();
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)));

main()
  .then(async (code) => {
    await stopAll();
    process.exit(code);
  })
  .catch(async (err: Error) => {
    log(err instanceof BenchUsageError ? `bench: ${err.message} (--help lists the options)` : `bench: ${err.stack ?? err.message}`);
    await stopAll();
    process.exit(err instanceof BenchUsageError ? 2 : 1);
  });
