/**
 * Scenario 3: overload. A slow engine (each call held 200 ms) behind N=32 slots and Q=16
 * queue places holds about 160 calls/s; an open-loop client offers 10x that. Measures how fast
 * and how cheaply the excess is turned away: the sidecar's RESOURCE_EXHAUSTED, HAProxy's 503
 * (maxconn 32 maxqueue 16, short timeout queue), nginx's limit_conn 503 (no queue).
 *
 * A call is a rejection by what the proxy answered: a 503 (HAProxy, nginx) or grpc-status 8
 * (the sidecar's Trailers-Only RESOURCE_EXHAUSTED). h2load cannot tell: it only sees :status,
 * which is 200 for every gRPC answer, and judging by speed (a 200 faster than half the hold
 * taken as a rejection) miscounted on a loaded machine, where rejections took longer than that.
 * So the load comes from bench/clients/unary-client.ts, which reads grpc-status from the
 * trailers (or the Trailers-Only headers) and accounts for every call it started; for the
 * sidecar its count must equal the sidecar's own grpc-status 8 counter over the run.
 */
import type { UnaryRunCommand, UnaryRunResult } from '../clients/unary-client.js';
import { startSteppedClient } from '../lib/client.js';
import { settleRule, warmUp } from '../lib/settle.js';
import type { BenchProcess } from '../lib/spawn.js';
import { withTargets, type Target } from '../targets/index.js';
import { rosterSpecs } from '../targets/roster.js';
import { runRounds } from './rounds.js';
import { pairScenario } from './summary.js';
import { newResult, type BenchContext, type PairDef, type ScenarioResult } from './types.js';

const N = 32;
const Q = 16;
const HOLD_MS = 200;
const QUEUE_TIMEOUT_MS = 50;
const OFFERED = Math.round((10 * N * 1000) / HOLD_MS);
const CONNECTIONS = 8;
/** Streams per connection: far above what is ever in flight (N + Q + the rejections under way). */
const STREAMS = 64;

export const OVERLOAD_AB: PairDef[] = [
  { metric: 'cpuUsPerRejection', op: 'ratio', label: 'CPU us/rejection' },
  { metric: 'rejectP99Us', op: 'ratio', label: 'reject p99' },
];

/** Most a run waits, after its last call started, for the calls still open (the longest takes the hold plus its queue wait). */
const DRAIN_MS = 10_000;

/** The load client: one process for the whole scenario (every target, warm-up slices and rounds), given one run at a time. */
function startLoadClient(ctx: BenchContext): BenchProcess {
  return startSteppedClient(
    'unary-client',
    {
      path: '/bench.Bench/Slow',
      bodyBytes: 100,
      headers: { 'x-bench-hold-ms': String(HOLD_MS) },
      connections: CONNECTIONS,
      streamsPerConnection: STREAMS,
      rpsPerConnection: OFFERED / CONNECTIONS,
      drainMs: DRAIN_MS,
    },
    ctx.plan.client,
  );
}

let runsAsked = 0;

async function overloadRun(client: BenchProcess, target: Target, durationMs: number): Promise<UnaryRunResult> {
  const run = ++runsAsked;
  const cmd: UnaryRunCommand = { port: target.port, pid: target.pid ?? null, durationMs };
  client.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
  const line = await client.waitFor(new RegExp(`^(\\{"run":${run},.*)\\n`, 'm'), durationMs + DRAIN_MS + 30_000);
  const r = JSON.parse(line[1]!) as UnaryRunResult;
  if (r.ok + r.rejected === 0) throw new Error(`the load client got no answer (${r.started} started, ${r.errored} errored, ${r.unfinished} unfinished)`);
  return r;
}

/** RESOURCE_EXHAUSTED answers the sidecar counted itself (its metric labels the code by name or number). */
function exhausted(codes: Record<string, number> | undefined): number {
  return (codes?.['8'] ?? 0) + (codes?.['RESOURCE_EXHAUSTED'] ?? 0);
}

export async function runOverload(ctx: BenchContext): Promise<ScenarioResult> {
  const rule = settleRule(ctx.options.quick, 2000);
  // 8 s: a p99 over 4 s (about 5,700 rejections) moved 1-10 ms between rounds with the odd GC pause.
  const durationMs = ctx.options.quick ? 1000 : 8000;
  const result = newResult(
    'overload',
    `Scenario 3: overload, ${OFFERED} calls/s offered to N=${N} Q=${Q} on a ${HOLD_MS} ms engine`,
    [
      `bench/clients/unary-client.ts for ${durationMs} ms: ${CONNECTIONS} HTTP/2 connections, at most ${STREAMS} calls in flight on each, ${OFFERED / CONNECTIONS} calls/s per connection (open loop, ${OFFERED} unary calls/s, 10x the ${(N * 1000) / HOLD_MS}/s the engine holds); upstream holds each call ${HOLD_MS} ms; every call started is waited for (at most ${DRAIN_MS / 1000} s after the last)`,
      `rejection = HTTP 503 (haproxy, nginx) or grpc-status 8 RESOURCE_EXHAUSTED (the sidecar), read from each answer's trailers or Trailers-Only headers; ok = 200 with grpc-status 0; for the sidecar the count must equal its own grpc-status 8 counter over the run; time to rejection = from writing the call's frames to the arrival of its answer's last frame`,
      `sidecar --engine-request-limit ${N}, DYN_DYNAMO_REQUEST_QUEUE_LIMIT=${Q}; haproxy server maxconn ${N} maxqueue ${Q}, timeout queue ${QUEUE_TIMEOUT_MS}ms; nginx limit_conn ${N} (no queue)`,
      'proxy CPU us/rejection = proxy CPU (per-thread on-CPU ns, read by the client right before it connects and 50 ms after its connections closed; idle outside) / rejections, admitted calls included',
      'the client speaks HTTP/2 over a plain socket: h2load sees only :status (200 for every gRPC answer), and a node:http2 client at this rate stalls 5-30 ms in its own scavenges (each stream outlives one), hiding the 2 ms the goal is about',
      `warm-up before a target's first round: separate ${rule.sliceMs} ms runs of the same load until three consecutive runs' CPU us/rejection agree within ${rule.tolerance * 100}% (each to the one before; at most ${rule.maxSlices})`,
    ],
    [
      { key: 'offeredPerSec', label: 'offered/s', digits: 0 },
      { key: 'okPerSec', label: 'ok/s', digits: 0 },
      { key: 'rejectedPerSec', label: 'rejected/s', digits: 0 },
      { key: 'rejectP50Us', label: 'reject p50 us', digits: 0 },
      { key: 'rejectP99Us', label: 'reject p99 us', digits: 0 },
      { key: 'cpuUsPerRejection', label: 'CPU us/rejection', digits: 1 },
      { key: 'other', label: 'other', digits: 0 },
    ],
  );
  const specs = rosterSpecs(ctx.roster, {
    direct: false,
    sidecar: { limit: N, queue: Q },
    haproxy: { limit: N, queue: Q, queueTimeoutMs: QUEUE_TIMEOUT_MS },
    nginx: { limit: N },
  });
  return withTargets(specs, ctx.plan, ctx.dir, async (targets) => {
    const byName = (name: string): Target => targets.find((t) => t.name === name)!;
    const client = startLoadClient(ctx);
    try {
      await runRounds(result, {
        targets: targets.map((t) => t.name),
        rounds: ctx.options.rounds,
        warmup: async (name) => {
          const warm = await warmUp(rule, true, async () => {
            const w = await overloadRun(client, byName(name), rule.sliceMs);
            return ((w.cpuS ?? NaN) * 1e6) / w.rejected;
          });
          result.warmups.push({ target: name, unit: 'us/rejection', ...warm });
        },
        measure: async (name) => {
          const target = byName(name);
          const before = await target.grpcCodes?.();
          const r = await overloadRun(client, target, durationMs);
          const after = await target.grpcCodes?.();
          const seconds = durationMs / 1000;
          const cpuS = r.cpuS ?? NaN;
          const cpuTickS = r.cpuTickS ?? NaN;
          if (r.rejected === 0) throw new Error('no call was rejected: the overload did not overload');
          if (before && after) {
            // The sidecar counts a call's status before it answers, and the client waits for every
            // call it started: the two counts are equal, up to calls still open at the end (cancelled).
            const counted = exhausted(after) - exhausted(before);
            if (Math.abs(counted - r.rejected) > r.unfinished)
              result.errors.push(`${name}: the client got ${r.rejected} rejections, but the sidecar counted ${counted} RESOURCE_EXHAUSTED`);
          }
          ctx.log(
            `  overload ${name}: ${(r.rejected / seconds).toFixed(0)} rejected/s, ${(r.ok / seconds).toFixed(0)} ok/s, reject p99 ${r.rejectUs.p99.toFixed(0)} us, CPU ${((cpuS * 1e6) / r.rejected).toFixed(1)} us/rejection`,
          );
          return {
            offeredPerSec: r.started / seconds,
            okPerSec: r.ok / seconds,
            rejectedPerSec: r.rejected / seconds,
            rejectP50Us: r.rejectUs.p50,
            rejectP99Us: r.rejectUs.p99,
            okP50Us: r.okUs.p50 ?? NaN,
            cpuUsPerRejection: (cpuS * 1e6) / r.rejected,
            cpuTickUsPerRejection: (cpuTickS * 1e6) / r.rejected,
            // Answers that are neither (other statuses), and calls that ended without one.
            other: r.other,
          };
        },
      });
    } finally {
      await client.stop('SIGKILL');
    }
    pairScenario(
      result,
      ctx.roster,
      [
        {
          numerators: 'sidecars',
          denominator: 'haproxy',
          defs: [
            { metric: 'cpuUsPerRejection', op: 'ratio', label: 'CPU us/rejection (HAProxy: per 503)' },
            { metric: 'rejectP99Us', op: 'ratio', label: 'time to rejection p99' },
          ],
        },
      ],
      OVERLOAD_AB,
    );
    return result;
  });
}
