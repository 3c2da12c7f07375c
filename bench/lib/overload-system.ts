/**
 * The overload benchmarks' system under test and what their scenarios share: two simulated
 * engines (the demo's model x GPU with the demo's small KV, so 2 workers saturate on 2 cores), a
 * sidecar in front of each and the frontend over both, all real processes; the request mixes;
 * the configurations; and the progress bar.
 */
import { REPO_ROOT, SIDECAR_MAIN } from './paths.js';
import { spawnProcess, stopAll, localSidecarEnv } from './spawn.js';

/** One configuration of the system: the sidecars' flags and environment, and the frontend's flags. */
export interface SystemConfig {
  readonly sidecar: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly frontend: readonly string[];
}

/**
 * This project's best configuration so far (docs/performance.md, "Goodput under overload"): N = 12
 * and Q = 4 with the first-token limit 2, refusal by expected wait beyond 50 ms and the adaptive
 * pushback; the frontend routes by the sidecars' predicted TTFT (its default).
 */
export const BEST: SystemConfig = {
  // Tuned on quick looks (one run each of 2x, 4x, 8x of C = 14/s; docs/performance.md): N 12 serves
  // about 18 req/s within the SLO where N 10 (no KV preemption) serves about 15; F 2 and a 50 ms
  // longest expected wait brought p99 TTFT at 8x from 1.2 s (F 3, 100 ms) to 0.45 s at the same goodput.
  sidecar: ['--engine-request-limit', '12', '--first-token-limit', '2', '--max-queue-wait-ms', '50', '--retry-pushback-mode', 'adaptive'],
  env: { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4' },
  frontend: [],
};

/**
 * BEST for sidecars that are sent classes (priority, tenant): the longest expected wait is 200 ms
 * instead of 50. A call that finds every slot taken waits about one slot time / N (about 110 ms
 * here) before the queue's order can help it at all, so with 50 ms every urgent or polite call
 * that must queue is refused like the rest; its place in the order (sidecar.md) is what makes the
 * wait it is told short. Tuned on quick looks of both scenarios (docs/performance.md).
 */
export const BEST_WITH_CLASSES: SystemConfig = {
  ...BEST,
  sidecar: BEST.sidecar.map((arg, i, all) => (all[i - 1] === '--max-queue-wait-ms' ? '200' : arg)),
};

/** The workers' engines: the demo's model x GPU with the demo's small KV, so 2 workers saturate on 2 cores. */
export const DEFAULT_PRESET = 'llama-3.3-70b-fp8-2xh100';
/** A worker's engine command line: the preset's model x GPU with the demo's small KV, on ports of its own. */
export const engineArgs = (preset: string): string[] => [
  'engine',
  '--preset',
  preset,
  '--num-gpu-blocks',
  '128',
  '--host',
  '127.0.0.1',
  '--port',
  '0',
  '--metrics-port',
  '0',
];

/** The request mixes: fixed lengths, or heavy-tailed ones (lognormal, median about 128 and 45 tokens; see draw in the load client). */
export const MIXES = {
  fixed: { promptTokens: { min: 128, max: 128 }, maxTokens: { min: 64, max: 64 }, lengthDistribution: 'uniform' },
  heavy: { promptTokens: { min: 16, max: 1024 }, maxTokens: { min: 8, max: 256 }, lengthDistribution: 'lognormal' },
} as const;
export type MixName = keyof typeof MIXES;

export interface System {
  readonly url: string;
  /** The engines' Prometheus endpoints, from their ready lines. */
  readonly engineMetricsUrls: readonly string[];
  stop(): Promise<void>;
}

/** Two engines, a sidecar in front of each, the frontend over both: the demo's topology, as separate processes. */
export async function startSystem(config: SystemConfig, preset = DEFAULT_PRESET): Promise<System> {
  const workers: string[] = [];
  const engineMetricsUrls: string[] = [];
  for (let i = 0; i < 2; i++) {
    const engine = spawnProcess(`engine-${i}`, process.execPath, [SIDECAR_MAIN, ...engineArgs(preset), '--seed', String(i)], { cwd: REPO_ROOT });
    const ready = await engine.waitFor(/grpc=(\S+) metrics=(\S+)/, 15_000);
    engineMetricsUrls.push(ready[2]!);
    const sidecar = spawnProcess(
      `sidecar-${i}`,
      process.execPath,
      [SIDECAR_MAIN, '--upstream', ready[1]!, '--engine-metrics-url', ready[2]!, ...config.sidecar],
      {
        cwd: REPO_ROOT,
        env: localSidecarEnv({ DYN_LOG_LEVEL: 'error', ...config.env }),
      },
    );
    workers.push(`127.0.0.1:${(await sidecar.waitFor(/listening on \S+:(\d+),/, 15_000))[1]}`);
  }
  const frontend = spawnProcess(
    'frontend',
    process.execPath,
    [SIDECAR_MAIN, 'frontend', ...workers.flatMap((w) => ['--worker', w]), '--http-host', '127.0.0.1', '--http-port', '0', ...config.frontend],
    {
      cwd: REPO_ROOT,
      env: { ...process.env, DYN_LOG_LEVEL: 'error' },
    },
  );
  const url = (await frontend.waitFor(/listening on (http:\/\/\S+),/, 15_000))[1]!;
  for (
    let i = 0;
    i < 100 &&
    (await fetch(`${url}/ready`).then(
      (r) => r.status,
      () => 0,
    )) !== 200;
    i++
  )
    await new Promise((r) => setTimeout(r, 100));
  return { url, engineMetricsUrls, stop: () => stopAll() };
}

/** Flags given as one string after = (`--best-args=--a 1 --b 2`), or the built-in ones. */
export const argsOr = (given: string | undefined, builtIn: readonly string[]): readonly string[] =>
  given !== undefined ? given.split(/\s+/u).filter(Boolean) : builtIn;

/** A bar of runs done on stderr, redrawn in place. */
/** The options every scenario shares, checked alike: what is wrong with each, as lines for the user. */
export function runProblems(run: {
  readonly configs: readonly string[];
  readonly known: readonly string[];
  readonly pointS: number;
  readonly repeats: number;
  readonly slo: { readonly sloTtftMs: number; readonly sloItlMs: number };
  readonly seed: number;
  readonly graceS: number;
}): string[] {
  return [
    ...(run.configs.every((c) => run.known.includes(c)) ? [] : [`--configs must be among ${run.known.join(', ')}`]),
    ...(run.pointS >= 1 ? [] : ['--point-s must be >= 1']),
    ...(Number.isInteger(run.repeats) && run.repeats >= 1 ? [] : ['--repeats must be an integer >= 1']),
    ...(run.slo.sloTtftMs > 0 && run.slo.sloItlMs > 0 ? [] : ['--slo-ttft-ms and --slo-itl-ms must be > 0']),
    ...(Number.isInteger(run.seed) && run.seed >= 0 ? [] : ['--seed must be an integer >= 0']),
    ...(run.graceS >= 0 ? [] : ['--grace-s must be >= 0']),
  ];
}

/** Bad options: each problem and the help on stderr, exit 2. */
export function exitOnProblems(problems: readonly string[], help: string): void {
  if (problems.length === 0) return;
  console.error(`${problems.join('\n')}\n${help}`);
  process.exit(2);
}

export class ProgressBar {
  done = 0;
  total = 0;

  show(what: string): void {
    const width = 30;
    const filled = this.total === 0 ? 0 : Math.round((Math.min(this.done, this.total) / this.total) * width);
    process.stderr.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${this.done}/${this.total} ${what}`.padEnd(110));
  }
}
