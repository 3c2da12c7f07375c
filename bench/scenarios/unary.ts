/**
 * Scenario 1: unary, 100 B echo against the instant upstream, closed loop with h2load
 * (8 connections x 8 streams = 64 in flight). Admission off and on (N far above the load).
 */
import { writeBodyFile, h2load } from '../lib/h2load.js';
import { CpuMeter } from '../lib/proc.js';
import { sleep } from '../lib/spawn.js';
import { withTargets, type TargetSpec } from '../targets/index.js';
import { interleave, newResult, sidecarRatios, type BenchContext, type ScenarioResult } from './types.js';

const NEVER_REJECT = { limit: 10_000, queue: 16 };

export function unarySpecs(ctx: BenchContext): TargetSpec[] {
  const specs: TargetSpec[] = [
    { name: 'direct', kind: 'direct' },
    { name: 'sidecar', kind: 'sidecar' },
    { name: 'sidecar+admission', kind: 'sidecar', admission: NEVER_REJECT },
  ];
  if (ctx.haveHaproxy) specs.push({ name: 'haproxy', kind: 'haproxy', admission: NEVER_REJECT });
  if (ctx.haveNginx) specs.push({ name: 'nginx', kind: 'nginx', admission: NEVER_REJECT });
  return specs;
}

export async function runUnary(ctx: BenchContext): Promise<ScenarioResult> {
  const quick = ctx.options.quick;
  const durationS = quick ? 1 : 4;
  const clients = 8;
  const streams = 8;
  const result = newResult(
    'unary',
    'Scenario 1: unary 100 B echo, fast upstream',
    [
      `h2load -D ${durationS} -c ${clients} -m ${streams} -t 1, body file = 5-byte gRPC prefix + 100 B, headers content-type: application/grpc, te: trailers; path /bench.Bench/Unary on a raw node:http2 echo upstream`,
      'req/s from h2load; p50/p99 from h2load --log-file (per-request elapsed us)',
      'proxy CPU us/req = (utime+stime of the proxy process tree from /proc/PID/stat, after - before the h2load run) / requests done',
      `admission on: sidecar --engine-request-limit ${NEVER_REJECT.limit} (Q=${NEVER_REJECT.queue}); haproxy server maxconn ${NEVER_REJECT.limit} maxqueue ${NEVER_REJECT.queue}; nginx limit_conn ${NEVER_REJECT.limit} per server; haproxy and nginx always run with these limits`,
      "grpcOk/grpcOther: grpc-status counts from the sidecar's dynamo_sidecar_requests_total; h2load itself only checks :status (2xx counted as ok)",
      quick ? 'quick mode: no warm-up run' : 'each target gets one 1 s warm-up run (JIT) before the measured rounds',
    ],
    [
      { key: 'reqPerSec', label: 'req/s', digits: 0 },
      { key: 'p50Us', label: 'p50 us', digits: 0 },
      { key: 'p99Us', label: 'p99 us', digits: 0 },
      { key: 'cpuUsPerReq', label: 'proxy CPU us/req', digits: 1 },
      { key: 'non2xx', label: 'non-2xx', digits: 0 },
      { key: 'grpcOther', label: 'grpc!=0', digits: 0 },
    ],
  );
  return withTargets(unarySpecs(ctx), ctx.plan, ctx.dir, async (targets) => {
    const bodyFile = writeBodyFile(ctx.dir, 100);
    const run = (port: number, seconds: number) =>
      h2load({ port, path: '/bench.Bench/Unary', bodyFile, durationS: seconds, clients, streamsPerClient: streams, cpus: ctx.plan.client, dir: ctx.dir });
    if (!quick) for (const t of targets) await run(t.port, 1).catch(() => undefined);
    await interleave(
      targets.map((t) => t.name),
      ctx.options.rounds,
      result.rows,
      result.errors,
      async (name) => {
        const target = targets.find((t) => t.name === name)!;
        const before = await target.grpcCodes?.();
        const meter = new CpuMeter(target.pid);
        meter.start();
        const r = await run(target.port, durationS);
        const cpu = meter.stop();
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
        ctx.log(`  unary ${name}: ${r.requestsPerSec.toFixed(0)} req/s p99 ${r.latencyUs.p99} us`);
        await sleep(200);
        return {
          reqPerSec: r.requestsPerSec,
          p50Us: r.latencyUs.p50,
          p99Us: r.latencyUs.p99,
          cpuUsPerReq: (cpu * 1e6) / r.done,
          requests: r.done,
          non2xx: r.non2xx,
          failed: r.failed + r.errored,
          grpcOk,
          grpcOther,
        };
      },
    );
    result.ratios = [...sidecarRatios(result.rows, ['reqPerSec', 'p99Us', 'cpuUsPerReq']), ...sidecarRatios(result.rows, ['reqPerSec'], 'sidecar+admission')];
    return result;
  });
}
