/**
 * Scenario 3: overload. A slow engine (each call held 200 ms) behind N=32 slots and Q=16
 * queue places holds about 160 calls/s; an open-loop client offers 10x that. Measures how fast
 * and how cheaply the excess is turned away: the sidecar's RESOURCE_EXHAUSTED, HAProxy's 503
 * (maxconn 32 maxqueue 16, short timeout queue), nginx's limit_conn 503 (no queue).
 */
import type { OverloadClientResult } from '../clients/overload-client.js';
import { runClient } from '../lib/client.js';
import { settleRule, type SettleRule } from '../lib/settle.js';
import { withTargets, type Target } from '../targets/index.js';
import { rosterSpecs } from '../targets/roster.js';
import { runRounds } from './rounds.js';
import { pairScenario, summarizeRows } from './summary.js';
import { newResult, type BenchContext, type PairDef, type ScenarioResult } from './types.js';

const N = 32;
const Q = 16;
const HOLD_MS = 200;
const QUEUE_TIMEOUT_MS = 50;
const OFFERED = Math.round((10 * N * 1000) / HOLD_MS);

export const OVERLOAD_AB: PairDef[] = [
  { metric: 'cpuUsPerRejection', op: 'ratio', label: 'CPU us/rejection' },
  { metric: 'rejectP99Us', op: 'ratio', label: 'reject p99' },
];

function overloadRun(target: Target, windowMs: number, cpus: string | undefined, warmup: SettleRule | null): Promise<OverloadClientResult> {
  const params = { port: target.port, ratePerSec: OFFERED, windowMs, holdMs: HOLD_MS, sessions: 8, pid: target.pid ?? null, warmup };
  return runClient<OverloadClientResult>('overload-client', params, cpus, 60_000 + (warmup ? warmup.maxSlices * warmup.sliceMs : windowMs));
}

export async function runOverload(ctx: BenchContext): Promise<ScenarioResult> {
  const rule = settleRule(ctx.options.quick);
  const windowMs = ctx.options.quick ? 1000 : 4000;
  const result = newResult(
    'overload',
    `Scenario 3: overload, ${OFFERED} calls/s offered to N=${N} Q=${Q} on a ${HOLD_MS} ms engine`,
    [
      `open-loop node:http2 client (8 connections) offering ${OFFERED} unary calls/s (10x the ${(N * 1000) / HOLD_MS}/s the engine holds) for ${windowMs / 1000} s; upstream holds each call ${HOLD_MS} ms`,
      'time to rejection = client send -> response headers carrying grpc-status 8 RESOURCE_EXHAUSTED (sidecar, Trailers-Only) or HTTP 503 (haproxy, nginx)',
      `sidecar --engine-request-limit ${N}, DYN_DYNAMO_REQUEST_QUEUE_LIMIT=${Q}; haproxy server maxconn ${N} maxqueue ${Q}, timeout queue ${QUEUE_TIMEOUT_MS}ms; nginx limit_conn ${N} (no queue)`,
      "proxy CPU us/rejection = proxy CPU over the client's window / rejections; the client reads the proxy tree's per-thread on-CPU ns itself, once its connections are up (proxy idle) and once the last offered call is answered, so admitted calls are included",
      `warm-up before a target's first round: the same load in ${rule.sliceMs} ms slices until two consecutive slices' CPU us/rejection differ < ${rule.tolerance * 100}% (at most ${rule.maxSlices})`,
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
    await runRounds(result, {
      targets: targets.map((t) => t.name),
      rounds: ctx.options.rounds,
      warmup: async (name) => {
        const r = await overloadRun(byName(name), 0, ctx.plan.client, rule);
        result.warmups.push({ target: name, unit: 'us/rejection', slices: r.slices, settled: r.settled });
      },
      measure: async (name) => {
        const r = await overloadRun(byName(name), windowMs, ctx.plan.client, null);
        ctx.log(
          `  overload ${name}: ${r.rejectedPerSec.toFixed(0)} rejected/s, ${r.okPerSec.toFixed(0)} ok/s, reject p99 ${r.rejectLatencyUs.p99.toFixed(0)} us, CPU ${r.cpuS === null ? '-' : ((r.cpuS * 1e6) / r.rejected).toFixed(1)} us/rejection`,
        );
        if (Object.keys(r.otherKinds).length) result.extra = { ...result.extra, [`${name}-other-kinds`]: r.otherKinds };
        if (r.rejected === 0) throw new Error('no call was rejected: the overload did not overload');
        return {
          offeredPerSec: r.offeredPerSec,
          okPerSec: r.okPerSec,
          rejectedPerSec: r.rejectedPerSec,
          rejectP50Us: r.rejectLatencyUs.p50,
          rejectP99Us: r.rejectLatencyUs.p99,
          okP50Us: r.okLatencyUs.p50,
          cpuUsPerRejection: r.cpuS === null ? NaN : (r.cpuS * 1e6) / r.rejected,
          cpuTickUsPerRejection: r.cpuTickS === null ? NaN : (r.cpuTickS * 1e6) / r.rejected,
          other: r.other,
          unfinished: r.unfinished,
          windowS: r.windowS,
        };
      },
    });
    summarizeRows(result.rows);
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
