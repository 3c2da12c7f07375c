/**
 * Scenario 3: overload. A slow engine (each call held 200 ms) behind N=32 slots and Q=16
 * queue places holds about 160 calls/s; an open-loop client offers 10x that. Measures how fast
 * and how cheaply the excess is turned away: the sidecar's RESOURCE_EXHAUSTED, HAProxy's 503
 * (maxconn 32 maxqueue 16, short timeout queue), nginx's limit_conn 503 (no queue).
 */
import { runClient } from '../lib/client.js';
import { CpuMeter } from '../lib/proc.js';
import type { Distribution } from '../lib/stats.js';
import { withTargets, type TargetSpec } from '../targets/index.js';
import { interleave, newResult, sidecarRatios, type BenchContext, type ScenarioResult } from './types.js';

const N = 32;
const Q = 16;
const HOLD_MS = 200;
const QUEUE_TIMEOUT_MS = 50;
const OFFERED = Math.round((10 * N * 1000) / HOLD_MS);

interface OverloadClientResult {
  sent: number;
  ok: number;
  rejected: number;
  other: number;
  unfinished: number;
  seconds: number;
  offeredPerSec: number;
  rejectedPerSec: number;
  okPerSec: number;
  otherKinds: Record<string, number>;
  rejectLatencyUs: Distribution;
  okLatencyUs: Distribution;
}

export function overloadSpecs(ctx: BenchContext): TargetSpec[] {
  const specs: TargetSpec[] = [{ name: 'sidecar', kind: 'sidecar', admission: { limit: N, queue: Q } }];
  if (ctx.haveHaproxy) specs.push({ name: 'haproxy', kind: 'haproxy', admission: { limit: N, queue: Q, queueTimeoutMs: QUEUE_TIMEOUT_MS } });
  if (ctx.haveNginx) specs.push({ name: 'nginx', kind: 'nginx', admission: { limit: N } });
  return specs;
}

export async function runOverload(ctx: BenchContext): Promise<ScenarioResult> {
  const durationMs = ctx.options.quick ? 1000 : 4000;
  const result = newResult(
    'overload',
    `Scenario 3: overload, ${OFFERED} calls/s offered to N=${N} Q=${Q} on a ${HOLD_MS} ms engine`,
    [
      `open-loop node:http2 client (8 connections) offering ${OFFERED} unary calls/s (10x the ${(N * 1000) / HOLD_MS}/s the engine holds) for ${durationMs / 1000} s; upstream holds each call ${HOLD_MS} ms`,
      'time to rejection = client send -> response headers carrying grpc-status 8 (sidecar, Trailers-Only) or HTTP 503 (haproxy, nginx)',
      `sidecar --engine-request-limit ${N}, DYN_DYNAMO_REQUEST_QUEUE_LIMIT=${Q}; haproxy server maxconn ${N} maxqueue ${Q}, timeout queue ${QUEUE_TIMEOUT_MS}ms; nginx limit_conn ${N} (no queue)`,
      'proxy CPU us/rejection = proxy CPU over the whole run (admitted calls included) / rejections',
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
  return withTargets(overloadSpecs(ctx), ctx.plan, ctx.dir, async (targets) => {
    await interleave(
      targets.map((t) => t.name),
      ctx.options.rounds,
      result.rows,
      result.errors,
      async (name) => {
        const target = targets.find((t) => t.name === name)!;
        const meter = new CpuMeter(target.pid);
        meter.start();
        const r = await runClient<OverloadClientResult>(
          'overload-client',
          { port: target.port, ratePerSec: OFFERED, durationMs, holdMs: HOLD_MS, sessions: 8 },
          ctx.plan.client,
          durationMs + 60_000,
        );
        const cpu = meter.stop();
        ctx.log(
          `  overload ${name}: ${r.rejectedPerSec.toFixed(0)} rejected/s, ${r.okPerSec.toFixed(0)} ok/s, reject p99 ${r.rejectLatencyUs.p99.toFixed(0)} us`,
        );
        if (Object.keys(r.otherKinds).length) result.extra = { ...result.extra, [`${name}-other-kinds-round`]: r.otherKinds };
        return {
          offeredPerSec: r.offeredPerSec,
          okPerSec: r.okPerSec,
          rejectedPerSec: r.rejectedPerSec,
          rejectP50Us: r.rejectLatencyUs.p50,
          rejectP99Us: r.rejectLatencyUs.p99,
          okP50Us: r.okLatencyUs.p50,
          cpuUsPerRejection: (cpu * 1e6) / r.rejected,
          other: r.other,
          unfinished: r.unfinished,
        };
      },
    );
    result.ratios = sidecarRatios(result.rows, ['rejectP99Us', 'cpuUsPerRejection']);
    return result;
  });
}
