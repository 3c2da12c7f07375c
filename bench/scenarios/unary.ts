/**
 * Scenario 1: unary, 100 B echo against the instant upstream, closed loop with h2load (8
 * connections x 8 streams = 64 in flight). Every proxy runs with admission on, never rejecting,
 * as it would in production (HAProxy with maxconn/maxqueue, the sidecar with its gate).
 */
import { writeBodyFile } from '../lib/h2load.js';
import { settleRule, warmUp, type SettleRule } from '../lib/settle.js';
import { NEVER_REJECT, withTargets, type Target } from '../targets/index.js';
import { rosterSpecs } from '../targets/roster.js';
import { h2loadWindow, type H2loadWindow } from './h2load-window.js';
import { runRounds } from './rounds.js';
import { pairScenario } from './summary.js';
import { newResult, type BenchContext, type PairDef, type ScenarioResult, type Warmup } from './types.js';

export const UNARY_CLIENTS = 8;
export const UNARY_STREAMS = 8;

export const UNARY_AB: PairDef[] = [
  { metric: 'cpuUsPerCall', op: 'ratio', label: 'CPU us/call' },
  { metric: 'reqPerSec', op: 'ratio', label: 'req/s' },
  { metric: 'p50Us', op: 'ratio', label: 'p50' },
  { metric: 'p99Us', op: 'ratio', label: 'p99' },
];

/** One unary h2load run against the target, with the proxy's CPU at its edges. */
export function unaryRun(ctx: BenchContext, target: Target, durationMs: number): Promise<H2loadWindow> {
  return h2loadWindow(target, {
    path: '/bench.Bench/Unary',
    bodyFile: writeBodyFile(ctx.dir, 100),
    durationMs,
    clients: UNARY_CLIENTS,
    streamsPerClient: UNARY_STREAMS,
    cpus: ctx.plan.client,
    dir: ctx.dir,
  });
}

/** Unary h2load runs of rule.sliceMs until the proxy's CPU per call has settled (or the cap). */
export async function unaryWarmup(ctx: BenchContext, target: Target, rule: SettleRule): Promise<Omit<Warmup, 'target'>> {
  const warm = await warmUp(rule, target.pid !== undefined, async () => {
    const run = await unaryRun(ctx, target, rule.sliceMs);
    return (run.cpuS * 1e6) / run.r.done;
  });
  return { unit: 'us/call', ...warm };
}

/** The measured run's length (the profile measures the same). */
export const unaryDurationMs = (quick: boolean): number => (quick ? 1000 : 4000);

export async function runUnary(ctx: BenchContext): Promise<ScenarioResult> {
  const quick = ctx.options.quick;
  const rule = settleRule(quick);
  const durationMs = unaryDurationMs(quick);
  const result = newResult(
    'unary',
    'Scenario 1: unary 100 B echo, fast upstream',
    [
      `h2load -D ${durationMs}ms -c ${UNARY_CLIENTS} -m ${UNARY_STREAMS} -t 1 (64 calls in flight), body = 5-byte gRPC prefix + 100 B, content-type application/grpc, te: trailers; raw node:http2 echo upstream`,
      'req/s from h2load; p50/p99 from h2load --log-file (per-request elapsed us)',
      "proxy CPU us/call = proxy tree's per-thread on-CPU ns (/proc/PID/task/*/schedstat), read right before h2load starts and 50 ms after it exits, / calls done; the proxy is idle outside the run (its idle CPU/s just before is in the JSON as idleCpuUsPerS), so the edges add only connection set-up and teardown",
      `admission on, never rejecting: sidecar --engine-request-limit ${NEVER_REJECT.limit} (Q=${NEVER_REJECT.queue}); haproxy server maxconn ${NEVER_REJECT.limit} maxqueue ${NEVER_REJECT.queue}; nginx limit_conn ${NEVER_REJECT.limit}`,
      "grpc!=0: non-OK grpc-status counted by the sidecar's dynamo_sidecar_requests_total (h2load only checks :status)",
      `warm-up before a target's first round: separate ${rule.sliceMs} ms h2load runs until three consecutive runs' CPU us/call agree within ${rule.tolerance * 100}% (each to the one before; at most ${rule.maxSlices})`,
    ],
    [
      { key: 'reqPerSec', label: 'req/s', digits: 0 },
      { key: 'p50Us', label: 'p50 us', digits: 0 },
      { key: 'p99Us', label: 'p99 us', digits: 0 },
      { key: 'cpuUsPerCall', label: 'proxy CPU us/call', digits: 1 },
      { key: 'non2xx', label: 'non-2xx', digits: 0 },
      { key: 'grpcOther', label: 'grpc!=0', digits: 0 },
    ],
  );
  const specs = rosterSpecs(ctx.roster, { direct: true, sidecar: NEVER_REJECT, haproxy: NEVER_REJECT, nginx: NEVER_REJECT });
  return withTargets(specs, ctx.plan, ctx.dir, async (targets) => {
    const byName = (name: string): Target => targets.find((t) => t.name === name)!;
    await runRounds(result, {
      targets: targets.map((t) => t.name),
      rounds: ctx.options.rounds,
      warmup: async (name) => void result.warmups.push({ target: name, ...(await unaryWarmup(ctx, byName(name), rule)) }),
      measure: async (name) => {
        const target = byName(name);
        const before = await target.grpcCodes?.();
        const { r, cpuS, cpuTickS, idleCpuUsPerS } = await unaryRun(ctx, target, durationMs);
        const after = await target.grpcCodes?.();
        let grpcOk = NaN;
        let grpcOther = NaN;
        if (before && after) {
          grpcOk = 0;
          grpcOther = 0;
          for (const [code, n] of Object.entries(after)) {
            const d = n - (before[code] ?? 0);
            if (code === '0' || code === 'OK') grpcOk += d;
            else grpcOther += d;
          }
        }
        ctx.log(`  unary ${name}: ${r.requestsPerSec.toFixed(0)} req/s, p99 ${r.latencyUs.p99} us, CPU ${((cpuS * 1e6) / r.done).toFixed(1)} us/call`);
        return {
          reqPerSec: r.requestsPerSec,
          p50Us: r.latencyUs.p50,
          p99Us: r.latencyUs.p99,
          cpuUsPerCall: (cpuS * 1e6) / r.done,
          cpuTickUsPerCall: (cpuTickS * 1e6) / r.done,
          idleCpuUsPerS,
          requests: r.done,
          non2xx: r.non2xx,
          failed: r.failed + r.errored,
          grpcOk,
          grpcOther,
        };
      },
    });
    pairScenario(
      result,
      ctx.roster,
      [
        {
          numerators: 'sidecars',
          denominator: 'haproxy',
          defs: [
            { metric: 'cpuUsPerCall', op: 'ratio', label: 'CPU us/call' },
            { metric: 'reqPerSec', op: 'ratio', label: 'req/s' },
            { metric: 'p50Us', op: 'ratio', label: 'p50' },
            { metric: 'p99Us', op: 'ratio', label: 'p99' },
          ],
        },
        {
          numerators: 'proxies',
          denominator: 'direct',
          defs: [
            { metric: 'reqPerSec', op: 'ratio', label: 'req/s vs direct' },
            { metric: 'p50Us', op: 'diff', label: 'added p50 us' },
            { metric: 'p99Us', op: 'diff', label: 'added p99 us' },
          ],
        },
      ],
      UNARY_AB,
    );
    return result;
  });
}
