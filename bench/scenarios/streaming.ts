/**
 * Scenario 2: token streaming. 256 concurrent server-streaming calls, each a stream of
 * one-token messages (16 B payload carrying the engine-side send time), two modes per round:
 *   flood   the upstream writes one message per stream per event-loop turn, as fast as it can:
 *           forwarded messages/s and proxy CPU per message
 *   paced   one message per stream every 20 ms (50 tokens/s per stream, about 12.8k msg/s in all):
 *           per-message latency, and the latency the proxy adds = proxy - direct of the same round
 */
import { runClient } from '../lib/client.js';
import { CpuMeter } from '../lib/proc.js';
import { medianRecord, type Distribution } from '../lib/stats.js';
import { withTargets, type TargetSpec } from '../targets/index.js';
import { interleave, newResult, sidecarRatios, type BenchContext, type ScenarioResult } from './types.js';

interface StreamClientResult {
  messages: number;
  messagesPerSec: number;
  callsFailed: number;
  latencyUs: Distribution;
}

export const STREAM_CONCURRENCY = 256;
const PACED_INTERVAL_MS = 20;

export function streamSpecs(ctx: BenchContext): TargetSpec[] {
  const specs: TargetSpec[] = [
    { name: 'direct', kind: 'direct' },
    { name: 'sidecar', kind: 'sidecar' },
  ];
  if (ctx.haveHaproxy) specs.push({ name: 'haproxy', kind: 'haproxy' });
  if (ctx.haveNginx) specs.push({ name: 'nginx', kind: 'nginx' });
  return specs;
}

export function streamClientParams(port: number, mode: 'flood' | 'paced', quick: boolean): Record<string, number> {
  return {
    port,
    concurrency: STREAM_CONCURRENCY,
    sessions: 4,
    count: mode === 'flood' ? 1000 : 50,
    intervalMs: mode === 'flood' ? 0 : PACED_INTERVAL_MS,
    warmupMs: quick ? 300 : 1000,
    durationMs: quick ? 1000 : 3000,
  };
}

export async function runStreaming(ctx: BenchContext): Promise<ScenarioResult> {
  const quick = ctx.options.quick;
  const result = newResult(
    'streaming',
    `Scenario 2: token streaming, ${STREAM_CONCURRENCY} concurrent server-streaming calls`,
    [
      `client: raw node:http2 process (4 connections, ${STREAM_CONCURRENCY} calls kept open, a finished call replaced at once), on the load-generator CPU; upstream: raw node:http2, one 16 B message (5 B gRPC prefix) per token`,
      'flood: upstream writes one message per stream per event-loop turn (1000 per call); msg/s = messages received in the window / window',
      'proxy CPU us/msg = proxy process-tree utime+stime (/proc) over the client run / messages received; msg per proxy CPU-s = 1e6 / that',
      `paced: one message per stream every ${PACED_INTERVAL_MS} ms; latency = client receive time - engine send time (CLOCK_MONOTONIC, in the payload); added = proxy - direct in the same round`,
      `window: ${quick ? '0.3 s warm-up + 1 s' : '1 s warm-up + 3 s'} measured per run; percentiles over a uniform reservoir sample of all messages`,
    ],
    [
      { key: 'floodMsgPerSec', label: 'flood msg/s', digits: 0 },
      { key: 'cpuUsPerMsg', label: 'proxy CPU us/msg', digits: 2 },
      { key: 'msgPerCpuSec', label: 'msg per proxy CPU-s', digits: 0 },
      { key: 'floodP99Us', label: 'flood p99 us', digits: 0 },
      { key: 'pacedMsgPerSec', label: 'paced msg/s', digits: 0 },
      { key: 'pacedP50Us', label: 'paced p50 us', digits: 0 },
      { key: 'pacedP99Us', label: 'paced p99 us', digits: 0 },
      { key: 'addedP50Us', label: 'added p50 us', digits: 0 },
      { key: 'addedP99Us', label: 'added p99 us', digits: 0 },
      { key: 'pacedCpuUsPerMsg', label: 'paced CPU us/msg', digits: 2 },
    ],
  );
  return withTargets(streamSpecs(ctx), ctx.plan, ctx.dir, async (targets, upstream) => {
    const runMode = async (name: string, mode: 'flood' | 'paced'): Promise<{ r: StreamClientResult; cpu: number }> => {
      const target = targets.find((t) => t.name === name)!;
      if (upstream.process.child.exitCode !== null) throw new Error(`upstream exited: ${upstream.process.stderr().slice(-500)}`);
      const meter = new CpuMeter(target.pid);
      const params = streamClientParams(target.port, mode, quick);
      meter.start();
      const r = await runClient<StreamClientResult>('stream-client', params, ctx.plan.client, params['warmupMs']! + params['durationMs']! + 30_000);
      // The meter spans warm-up too: scale CPU to the measured window by wall time.
      const cpu = meter.stop() * (params['durationMs']! / (params['warmupMs']! + params['durationMs']!));
      if (r.messages === 0)
        throw new Error(`${mode}: no messages received (${r.callsFailed} failed calls); upstream stderr: ${upstream.process.stderr().slice(-300)}`);
      return { r, cpu };
    };
    await interleave(
      targets.map((t) => t.name),
      ctx.options.rounds,
      result.rows,
      result.errors,
      async (name) => {
        // Paced first: a flood leaves buffered bytes behind that would colour the latency run.
        const paced = await runMode(name, 'paced');
        const flood = await runMode(name, 'flood');
        ctx.log(
          `  streaming ${name}: flood ${flood.r.messagesPerSec} msg/s (${flood.r.messages} msgs, ${flood.r.callsFailed} failed calls), paced ${paced.r.messages} msgs p99 ${paced.r.latencyUs.p99} us`,
        );
        const seconds = flood.r.messages / flood.r.messagesPerSec;
        const cpuUsPerMsg = (flood.cpu * 1e6) / flood.r.messages;
        return {
          floodMsgPerSec: flood.r.messagesPerSec,
          cpuUsPerMsg,
          msgPerCpuSec: 1e6 / cpuUsPerMsg,
          proxyCpuShare: flood.cpu / seconds,
          floodP50Us: flood.r.latencyUs.p50,
          floodP99Us: flood.r.latencyUs.p99,
          pacedMsgPerSec: paced.r.messagesPerSec,
          pacedP50Us: paced.r.latencyUs.p50,
          pacedP99Us: paced.r.latencyUs.p99,
          pacedCpuUsPerMsg: (paced.cpu * 1e6) / paced.r.messages,
          callsFailed: flood.r.callsFailed + paced.r.callsFailed,
        };
      },
    );
    // Added latency: subtract the direct run of the same round.
    const direct = result.rows.find((r) => r.target === 'direct');
    for (const row of result.rows) {
      row.rounds.forEach((fig, i) => {
        const d = direct?.rounds[i];
        fig['addedP50Us'] = d ? fig['pacedP50Us']! - d['pacedP50Us']! : NaN;
        fig['addedP99Us'] = d ? fig['pacedP99Us']! - d['pacedP99Us']! : NaN;
      });
    }
    for (const row of result.rows) row.median = medianRecord(row.rounds);
    result.ratios = sidecarRatios(result.rows, ['floodMsgPerSec', 'cpuUsPerMsg', 'pacedP99Us']);
    return result;
  });
}
