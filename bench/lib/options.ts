/** The benchmark's command line (documented at the top of bench/run.ts). */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { BenchOptions } from '../scenarios/types.js';
import { TARGET_KINDS } from '../targets/roster.js';

/** The default run: every scenario with a goal. The gate microbenchmark is on request only. */
export const DEFAULT_SCENARIOS = ['unary', 'streaming', 'overload', 'memory'];

const list = (values: readonly string[] | undefined): string[] =>
  (values ?? [])
    .flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter(Boolean);

export const BENCH_USAGE = `usage: node --import tsx bench/run.ts [options]   (npm run bench -- [options] does the set-up first)

  --quick                 smoke configuration: 1 round, short windows, memory steps 100/1,000, no profiles
  --rounds K              rounds per scenario (default 5, --quick 1)
  --scenario LIST         unary,streaming,overload,memory (the default) and gate (on request only); repeatable
  --targets LIST          direct,sidecar,haproxy,nginx (default: all that are installed); sidecar = every
                          sidecar row; the goals need haproxy
  --sidecar-node PATH     one more sidecar row on that Node binary, labelled sidecar@nodeX.Y.Z (repeatable);
                          without any, Node 24 is fetched and added, so Node 20 and 24 run side by side
  --no-node24             no automatic Node 24 row
  --upstream-connections LIST
                          each sidecar row becomes one row per K in LIST (e.g. 1,4,8), labelled "LABEL K=4", started with
                          --upstream-connections K and measured in the same rounds (default: one row, the sidecar's
                          default K); the A/B of --baseline pairs only an unsuffixed sidecar row
  --baseline REV          also build git revision REV (its src/, proto/) in the temp dir and run it as row
                          baseline@REV on this Node; the A/B section pairs it with the sidecar row, round by round
  --out FILE.json         where to write the JSON results (schema dynamo-sidecar-bench/2; default: a temp dir)
  --profile/--no-profile  sidecar CPU profiles cut to the measured windows of unary and streaming (default on)
  --no-pin                do not pin processes with taskset (proxy on CPU 0, upstream and clients on CPU 1)
  --time-limit-min M      hard stop after M minutes (default 45): everything started is stopped
`;

/** A bad command line: exit 2 with the message. */
export class BenchUsageError extends Error {
  override readonly name = 'BenchUsageError';
}

/** The options, or 'help' for --help / -h; throws BenchUsageError naming a bad option. */
export function parseOptions(argv: string[], known: readonly string[]): BenchOptions | 'help' {
  if (argv.includes('--help') || argv.includes('-h')) return 'help';
  try {
    return readOptions(argv, known);
  } catch (err) {
    throw new BenchUsageError((err as Error).message);
  }
}

function readOptions(argv: string[], known: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      scenario: { type: 'string', multiple: true },
      targets: { type: 'string', multiple: true },
      rounds: { type: 'string' },
      out: { type: 'string' },
      profile: { type: 'boolean' },
      'no-profile': { type: 'boolean' },
      'no-pin': { type: 'boolean', default: false },
      'sidecar-node': { type: 'string', multiple: true },
      'no-node24': { type: 'boolean', default: false },
      'upstream-connections': { type: 'string', multiple: true },
      baseline: { type: 'string' },
      'time-limit-min': { type: 'string' },
    },
  });
  const quick = values.quick ?? false;
  const scenarios = values.scenario ? list(values.scenario) : DEFAULT_SCENARIOS;
  for (const s of scenarios) if (!known.includes(s)) throw new Error(`unknown scenario "${s}" (known: ${known.join(', ')})`);
  const targets = values.targets ? list(values.targets) : [...TARGET_KINDS];
  for (const t of targets) if (!(TARGET_KINDS as readonly string[]).includes(t)) throw new Error(`unknown target "${t}" (known: ${TARGET_KINDS.join(', ')})`);
  const rounds = values.rounds === undefined ? (quick ? 1 : 5) : Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50) throw new Error(`--rounds must be an integer 1..50, got ${values.rounds}`);
  const upstreamConnections = list(values['upstream-connections']).map(Number);
  for (const k of upstreamConnections) {
    if (!Number.isInteger(k) || k < 1 || k > 64)
      throw new Error(`--upstream-connections takes integers 1..64, got ${values['upstream-connections']?.join(',')}`);
  }
  if (new Set(upstreamConnections).size !== upstreamConnections.length)
    throw new Error(`--upstream-connections names a K twice: ${upstreamConnections.join(',')}`);
  const timeLimitMin = values['time-limit-min'] === undefined ? 45 : Number(values['time-limit-min']);
  if (!(timeLimitMin > 0)) throw new Error(`--time-limit-min must be a positive number, got ${values['time-limit-min']}`);
  return {
    quick,
    rounds,
    scenarios,
    targets,
    out: values.out === undefined ? undefined : resolve(values.out),
    profile: values['no-profile'] ? false : (values.profile ?? !quick),
    pin: !values['no-pin'],
    sidecarNodes: list(values['sidecar-node']).map((p) => resolve(p)),
    node24: !values['no-node24'],
    upstreamConnections,
    baseline: values.baseline,
    timeLimitMin,
  };
}
