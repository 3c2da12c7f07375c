/**
 * Scenario 2: token streaming. 256 concurrent server-streaming calls against an upstream whose
 * one global timer writes one 16 B message to every open stream every 20 ms (a decode step:
 * bursts of 256 one-message DATA frames). Two call lengths per round, 50 and 500 tokens; a call
 * ends with OK trailers after its count and the client replaces it at once, so the two runs
 * carry the same messages per second but ten times fewer calls in the 500-token run. Proxy CPU
 * over a window = calls * c + messages * m; the two runs of a round give c (per call) and m (per
 * message). The goals' CPU per message and latency come from the 50-token run.
 */
import { runClient } from '../lib/client.js';
import { settleRule, type SettleRule } from '../lib/settle.js';
import type { StreamClientResult, StreamWindowResult } from '../clients/stream-client.js';
import { NEVER_REJECT, withTargets, type Target } from '../targets/index.js';
import { rosterSpecs } from '../targets/roster.js';
import { DECODE_TICK_MS } from '../targets/upstream.js';
import { runRounds } from './rounds.js';
import { pairScenario } from './summary.js';
import { newResult, type BenchContext, type Figures, type PairDef, type ScenarioResult } from './types.js';

export const STREAM_CONCURRENCY = 256;
export const SHORT_CALL = 50;
const LONG_CALL = 500;

export function streamParams(port: number, pid: number | undefined, count: number, quick: boolean, warmup: SettleRule | null): Record<string, unknown> {
  return {
    port,
    concurrency: STREAM_CONCURRENCY,
    sessions: 4,
    count,
    tickMs: DECODE_TICK_MS,
    leadMs: quick ? 300 : 600,
    windowTicks: quick ? 50 : 200,
    pid: pid ?? null,
    warmup,
  };
}

export async function streamRun(
  target: Target,
  count: number,
  quick: boolean,
  cpus: string | undefined,
  warmup: SettleRule | null,
): Promise<StreamClientResult> {
  const params = streamParams(target.port, target.pid, count, quick, warmup);
  const r = await runClient<StreamClientResult>('stream-client', params, cpus, 60_000 + (warmup ? warmup.maxSlices * warmup.sliceMs : 10_000));
  const w = r.windows[r.windows.length - 1];
  if (!w || w.messages === 0) throw new Error(`${count}-token run: no messages received (${r.callsFailed} failed calls)`);
  return r;
}

const SOLVE_NOTE = 'c, m: proxy CPU = calls * c + messages * m over each run, solved from the 50- and 500-token runs of the same round';

export const STREAM_AB: PairDef[] = [
  { metric: 'cpuUsPerMsg50', op: 'ratio', label: 'CPU us/msg (50-token)' },
  { metric: 'p50Us50', op: 'ratio', label: 'p50 (50-token)' },
  { metric: 'p99Us50', op: 'ratio', label: 'p99 (50-token)' },
  { metric: 'usPerCall', op: 'ratio', label: 'c: CPU us/call' },
  { metric: 'usPerMsg', op: 'ratio', label: 'm: CPU us/msg' },
];

function runFigures(suffix: string, w: StreamWindowResult): Figures {
  return {
    [`msgPerSec${suffix}`]: w.messages / w.seconds,
    [`callsPerSec${suffix}`]: w.callsCompleted / w.seconds,
    [`cpuUsPerMsg${suffix}`]: w.cpuUsPerMsg ?? NaN,
    [`cpuShare${suffix}`]: w.cpuS === null ? NaN : w.cpuS / w.seconds,
    [`cpuTickS${suffix}`]: w.cpuTickS ?? NaN,
    [`p50Us${suffix}`]: w.latencyUs?.p50 ?? NaN,
    [`p99Us${suffix}`]: w.latencyUs?.p99 ?? NaN,
    [`messages${suffix}`]: w.messages,
    [`calls${suffix}`]: w.callsCompleted,
    [`windowS${suffix}`]: w.seconds,
  };
}

/** c (us per call) and m (us per message) from two runs: P = C c + M m, two equations. */
export function solveCallAndMessage(a: StreamWindowResult, b: StreamWindowResult): { usPerCall: number; usPerMsg: number } {
  if (a.cpuS === null || b.cpuS === null) return { usPerCall: NaN, usPerMsg: NaN };
  const [p1, p2] = [a.cpuS * 1e6, b.cpuS * 1e6];
  const [c1, m1, c2, m2] = [a.callsCompleted, a.messages, b.callsCompleted, b.messages];
  const det = c1 * m2 - c2 * m1;
  if (det === 0) return { usPerCall: NaN, usPerMsg: NaN };
  return { usPerCall: (p1 * m2 - p2 * m1) / det, usPerMsg: (c1 * p2 - c2 * p1) / det };
}

/** The warm-up's slices: 2 s, as a 1 s slice of streaming holds too little work (bench/lib/settle.ts). */
export const streamingSettleRule = (quick: boolean): SettleRule => settleRule(quick, 2000);

export async function runStreaming(ctx: BenchContext): Promise<ScenarioResult> {
  const quick = ctx.options.quick;
  const rule = streamingSettleRule(quick);
  const probe = streamParams(0, undefined, SHORT_CALL, quick, null);
  const windowS = ((probe['windowTicks'] as number) * DECODE_TICK_MS) / 1000;
  const result = newResult(
    'streaming',
    `Scenario 2: token streaming, ${STREAM_CONCURRENCY} concurrent calls, bursts of ${STREAM_CONCURRENCY} one-message DATA frames every ${DECODE_TICK_MS} ms`,
    [
      `upstream: raw node:http2; ONE global timer every ${DECODE_TICK_MS} ms writes one 16 B message (engine CLOCK_MONOTONIC send time) as its own write to every open stream (a decode step); OK trailers right after a call's last token`,
      `client: raw node:http2 process (4 connections), ${STREAM_CONCURRENCY} calls kept open, each ended call replaced at once; each slot's first call asks for a random 1..count tokens so completions are spread from the start`,
      `two runs per target per round: ${SHORT_CALL}-token calls, then ${LONG_CALL}-token calls (same msg/s, 10x fewer calls); ${quick ? 0.3 : 0.6} s lead-in, then a ${windowS} s window (${probe['windowTicks'] as number} ticks)`,
      "CPU: the client reads the proxy tree's per-thread on-CPU ns (/proc/PID/task/*/schedstat) and CLOCK_MONOTONIC at the window edges itself; edges sit mid-gap between bursts (proxy idle); messages count when received inside the window",
      "latency per message = client receive time - engine send time (CLOCK_MONOTONIC); p50/p99 over a uniform reservoir sample of the window's messages; the client shares a core with the upstream (2-core machine), alike for every target",
      `${SOLVE_NOTE}; a constant per-second cost (timers) lands in m (both runs have the same message rate)`,
      `the goals' CPU per message and latency are the ${SHORT_CALL}-token run's; proxies run with admission on, never rejecting (sidecar --engine-request-limit ${NEVER_REJECT.limit}, haproxy maxconn ${NEVER_REJECT.limit} maxqueue ${NEVER_REJECT.queue}, nginx limit_conn ${NEVER_REJECT.limit})`,
      `warm-up before a target's first round: ${rule.sliceMs} ms slices of ${SHORT_CALL}-token load until three consecutive slices' CPU us/msg agree within ${rule.tolerance * 100}% (each to the one before; at most ${rule.maxSlices})`,
    ],
    [
      { key: 'msgPerSec50', label: 'msg/s', digits: 0 },
      { key: 'cpuUsPerMsg50', label: `CPU us/msg (${SHORT_CALL})`, digits: 2 },
      { key: 'p50Us50', label: `p50 us (${SHORT_CALL})`, digits: 0 },
      { key: 'p99Us50', label: `p99 us (${SHORT_CALL})`, digits: 0 },
      { key: 'cpuUsPerMsg500', label: `CPU us/msg (${LONG_CALL})`, digits: 2 },
      { key: 'p50Us500', label: `p50 us (${LONG_CALL})`, digits: 0 },
      { key: 'p99Us500', label: `p99 us (${LONG_CALL})`, digits: 0 },
      { key: 'usPerCall', label: 'c us/call', digits: 1 },
      { key: 'usPerMsg', label: 'm us/msg', digits: 2 },
      { key: 'callsPerSec50', label: `calls/s (${SHORT_CALL})`, digits: 0 },
      { key: 'callsFailed', label: 'failed calls', digits: 0 },
    ],
  );
  const specs = rosterSpecs(ctx.roster, { direct: true, sidecar: NEVER_REJECT, haproxy: NEVER_REJECT, nginx: NEVER_REJECT });
  return withTargets(specs, ctx.plan, ctx.dir, async (targets, upstream) => {
    const byName = (name: string): Target => targets.find((t) => t.name === name)!;
    const checkUpstream = (): void => {
      if (upstream.process.child.exitCode !== null) throw new Error(`upstream exited: ${upstream.process.stderr().slice(-500)}`);
    };
    await runRounds(result, {
      targets: targets.map((t) => t.name),
      rounds: ctx.options.rounds,
      warmup: async (name) => {
        checkUpstream();
        const r = await streamRun(byName(name), SHORT_CALL, quick, ctx.plan.client, rule);
        const slices = r.windows.map((w) => w.cpuUsPerMsg ?? NaN);
        result.warmups.push({ target: name, unit: 'us/msg', slices, settled: r.settled });
      },
      measure: async (name) => {
        checkUpstream();
        const target = byName(name);
        const short = await streamRun(target, SHORT_CALL, quick, ctx.plan.client, null);
        const long = await streamRun(target, LONG_CALL, quick, ctx.plan.client, null);
        const [a, b] = [short.windows[0]!, long.windows[0]!];
        const solved = solveCallAndMessage(a, b);
        ctx.log(
          `  streaming ${name}: ${a.messages} msgs, ${a.callsCompleted} calls / ${b.messages} msgs, ${b.callsCompleted} calls; CPU us/msg ${a.cpuUsPerMsg?.toFixed(2) ?? '-'} / ${b.cpuUsPerMsg?.toFixed(2) ?? '-'}; p99 ${a.latencyUs?.p99.toFixed(0)} us`,
        );
        return {
          ...runFigures('50', a),
          ...runFigures('500', b),
          ...solved,
          callsFailed: short.callsFailed + long.callsFailed,
          aligned: short.aligned && long.aligned ? 1 : 0,
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
            { metric: 'cpuUsPerMsg50', op: 'ratio', label: `CPU us/msg (${SHORT_CALL}-token)` },
            { metric: 'p50Us50', op: 'diff', label: `p50 us (${SHORT_CALL}-token)` },
            { metric: 'p99Us50', op: 'ratio', label: `p99 (${SHORT_CALL}-token)` },
            { metric: 'cpuUsPerMsg500', op: 'ratio', label: `CPU us/msg (${LONG_CALL}-token)` },
            { metric: 'p50Us500', op: 'diff', label: `p50 us (${LONG_CALL}-token)` },
            { metric: 'p99Us500', op: 'ratio', label: `p99 (${LONG_CALL}-token)` },
            // Not c and m: HAProxy's c is within the noise of the solve (it comes out negative in
            // some rounds), so a ratio to it says nothing; they are paired only in the A/B.
            { metric: 'usPerMsg', op: 'ratio', label: 'm: CPU us/msg' },
          ],
        },
        {
          numerators: 'proxies',
          denominator: 'direct',
          defs: [
            { metric: 'p50Us50', op: 'diff', label: `added p50 us (${SHORT_CALL}-token)` },
            { metric: 'p99Us50', op: 'diff', label: `added p99 us (${SHORT_CALL}-token)` },
            { metric: 'p50Us500', op: 'diff', label: `added p50 us (${LONG_CALL}-token)` },
            { metric: 'p99Us500', op: 'diff', label: `added p99 us (${LONG_CALL}-token)` },
          ],
        },
      ],
      STREAM_AB,
    );
    return result;
  });
}
