/**
 * Benchmark entry point (`npm run bench`, or `node --import tsx bench/run.ts`).
 *
 *   --quick             smoke configuration: 1 round, ~1 s per measurement, small memory steps
 *   --scenario NAME     unary | streaming | overload | memory | gate (repeatable or comma list; default all)
 *   --rounds K          interleaved rounds per scenario (default 3, quick 1)
 *   --out FILE.json     where to write the JSON results (default: bench-results-<time>.json in the temp dir)
 *   --profile / --no-profile   sidecar CPU profiles for scenarios 1 and 2 (default on, off with --quick)
 *   --no-pin            do not pin processes with taskset
 *
 * Every process (upstream, sidecar, HAProxy, nginx, load clients) is started here on
 * 127.0.0.1 with OS-picked ports and stopped before exit.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { planCpus } from './lib/affinity.js';
import { has, machineInfo } from './lib/machine.js';
import { stopAll } from './lib/spawn.js';
import { evaluateGoals, renderGoals } from './report/goals.js';
import { renderScenario } from './report/table.js';
import { runGate } from './scenarios/gate.js';
import { runMemory } from './scenarios/memory.js';
import { runOverload } from './scenarios/overload.js';
import { runProfiles, renderProfiles, type ProfileSummary } from './scenarios/profile.js';
import { runStreaming } from './scenarios/streaming.js';
import type { BenchContext, BenchOptions, ScenarioResult } from './scenarios/types.js';
import { runUnary } from './scenarios/unary.js';

const SCENARIOS: Record<string, (ctx: BenchContext) => Promise<ScenarioResult>> = {
  unary: runUnary,
  streaming: runStreaming,
  overload: runOverload,
  memory: runMemory,
  gate: runGate,
};

function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      scenario: { type: 'string', multiple: true },
      rounds: { type: 'string' },
      out: { type: 'string' },
      profile: { type: 'boolean' },
      'no-profile': { type: 'boolean' },
      'no-pin': { type: 'boolean', default: false },
    },
  });
  const scenarios = (values.scenario ?? Object.keys(SCENARIOS)).flatMap((s) => s.split(',')).filter(Boolean);
  for (const s of scenarios) if (!SCENARIOS[s]) throw new Error(`unknown scenario "${s}" (known: ${Object.keys(SCENARIOS).join(', ')})`);
  const rounds = values.rounds === undefined ? (values.quick ? 1 : 3) : Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50) throw new Error(`--rounds must be an integer 1..50, got ${values.rounds}`);
  const quick = values.quick ?? false;
  return {
    quick,
    rounds,
    scenarios,
    out: values.out === undefined ? undefined : resolve(values.out),
    profile: values['no-profile'] ? false : (values.profile ?? !quick),
    pin: !values['no-pin'],
  };
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  for (const tool of ['h2load', 'taskset']) if (!has(tool)) throw new Error(`${tool} not found: run \`bash .ci/setup.sh --bench\` (npm run bench does)`);
  const dir = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-bench-'));
  const plan = planCpus(options.pin);
  const ctx: BenchContext = {
    options,
    plan,
    dir,
    haveHaproxy: has('haproxy'),
    haveNginx: has('nginx'),
    log: (m) => process.stderr.write(`${m}\n`),
  };
  const machine = machineInfo(plan);
  ctx.log(`bench: ${machine.cores} cores (${machine.cpuModel}), node ${machine.node}, ${plan.description}; temp dir ${dir}`);
  if (!ctx.haveHaproxy) ctx.log('bench: haproxy not installed, its rows are skipped');
  if (!ctx.haveNginx) ctx.log('bench: nginx not installed, its rows are skipped');

  const started = Date.now();
  const results: ScenarioResult[] = [];
  for (const id of options.scenarios) {
    ctx.log(`bench: scenario ${id} ...`);
    const t0 = Date.now();
    try {
      results.push(await SCENARIOS[id]!(ctx));
    } catch (err) {
      ctx.log(`bench: scenario ${id} failed: ${(err instanceof Error ? err.stack : undefined) ?? String(err)}`);
      results.push({ id, title: id, method: [], metrics: [], rows: [], ratios: [], errors: [(err as Error).message] });
    }
    ctx.log(`bench: scenario ${id} took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  let profiles: ProfileSummary[] = [];
  if (options.profile && options.scenarios.some((s) => s === 'unary' || s === 'streaming')) {
    ctx.log('bench: sidecar CPU profiles ...');
    profiles = await runProfiles(ctx).catch((err: Error) => {
      ctx.log(`bench: profiling failed: ${err.message}`);
      return [];
    });
  }
  const goals = evaluateGoals(results);

  const output = [
    `dynamo-sidecar benchmark: ${machine.cores} cores, ${machine.cpuModel}, node ${machine.node}, haproxy ${machine.versions['haproxy']}, nginx ${machine.versions['nginx']}, h2load ${machine.versions['h2load']}`,
    `load average at start ${machine.loadAverageAtStart.join(' ')}, at end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (other work on the machine skews absolute figures; interleaving keeps ratios fair)`,
    `CPU placement: ${plan.description}; rounds per scenario: ${options.rounds} (targets interleaved A B C D per round)${options.quick ? '; QUICK smoke configuration' : ''}`,
    '',
    ...results.map((r) => `${renderScenario(r)}\n`),
    renderGoals(goals),
    ...(profiles.length ? ['', renderProfiles(profiles)] : []),
  ].join('\n');
  process.stdout.write(`${output}\n`);

  const out = options.out ?? join(dir, `bench-results-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const json = {
    schema: 'dynamo-sidecar-bench/1',
    startedAt: new Date(started).toISOString(),
    durationS: (Date.now() - started) / 1000,
    machine: { ...machine, loadAverageAtEnd: loadavg().map((l) => Math.round(l * 100) / 100) },
    options: { ...options, out: undefined },
    scenarios: results,
    goals,
    profiles,
  };
  writeFileSync(out, `${JSON.stringify(json, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`);
  process.stdout.write(`\nJSON results: ${out}\n`);
  // Keep the temp dir only when the JSON went into it (profiles and configs sit beside it).
  if (options.out) rmSync(dir, { recursive: true, force: true });
  return results.some((r) => r.rows.length === 0) ? 1 : 0;
}

const hardStop = setTimeout(() => {
  process.stderr.write('bench: hard time limit reached (30 min), stopping everything\n');
  void stopAll().then(() => process.exit(4));
}, 30 * 60_000);
hardStop.unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)));

main()
  .then(async (code) => {
    await stopAll();
    process.exit(code);
  })
  .catch(async (err: Error) => {
    process.stderr.write(`bench: ${err.stack ?? err.message}\n`);
    await stopAll();
    process.exit(1);
  });
