/**
 * Token-streaming load client. Keeps `concurrency` server-streaming calls open against the
 * upstream's decode loop (one message per open stream per tick); a call that ends (OK trailers
 * after its `count` tokens) is replaced at once. Each slot's first call asks for a random count
 * in 1..count, so completions are spread evenly from the start (steady state at once).
 *
 * After a lead-in it measures one window (measure mode) or back-to-back warm-up slices until the
 * proxy's CPU per message settles (warm-up mode). At every window edge it reads the proxy
 * process tree's CPU itself (/proc, see bench/lib/proc.ts) and CLOCK_MONOTONIC, so the CPU and
 * the messages counted cover exactly the same interval. Edges are put in the middle of the gap
 * between two bursts (the tick phase is read from the engine send times in the messages), where
 * the proxy is idle, and windows are whole numbers of ticks, so both edges cut the load alike.
 *
 * Per message: latency = client receive time - engine send time (both CLOCK_MONOTONIC).
 */
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { GrpcFrameReader } from '../../src/protocol/grpc/grpc-frames.js';
import { tokenTimestampNs } from '../lib/grpc-frame.js';
import { cpuBetween, cpuSampler, type CpuReading } from '../lib/proc.js';
import { wantsAnotherSlice, type SettleRule } from '../lib/settle.js';
import { distribution, Reservoir, type Distribution } from '../lib/stats.js';
import { emit, exitAfter, grpcHeaders, nowNs, openSessions, readParams } from './common.js';

interface Params {
  port: number;
  concurrency: number;
  sessions: number;
  count: number;
  tickMs: number;
  leadMs: number;
  /** Measure mode: one window of this many ticks. */
  windowTicks: number;
  /** Root pid of the proxy, or null (direct: nothing to measure). */
  pid: number | null;
  /** Warm-up mode: slices of rule.sliceMs until settled. */
  warmup: SettleRule | null;
}

interface Window {
  startNs: bigint;
  endNs: bigint;
  cpuStart: CpuReading | undefined;
  messages: number;
  callsStarted: number;
  callsCompleted: number;
  latencies: Reservoir | undefined;
}

export interface StreamWindowResult {
  startNs: string;
  endNs: string;
  seconds: number;
  messages: number;
  callsStarted: number;
  callsCompleted: number;
  cpuS: number | null;
  cpuTickS: number | null;
  cpuUsPerMsg: number | null;
  latencyUs: Distribution | null;
}

export interface StreamClientResult {
  windows: StreamWindowResult[];
  /** Warm-up mode: whether the last two slices agreed (null without a proxy). */
  settled: boolean | null;
  /** Edges placed mid-gap (false if no burst was seen by the end of the lead-in). */
  aligned: boolean;
  callsFailed: number;
}

const p = readParams<Params>();
const tickNs = BigInt(Math.round(p.tickMs * 1e6));
const sliceTicks = p.warmup ? Math.max(1, Math.round(p.warmup.sliceMs / p.tickMs)) : p.windowTicks;
const maxWindows = p.warmup ? p.warmup.maxSlices : 1;
exitAfter(p.leadMs + maxWindows * sliceTicks * p.tickMs + 20_000);

const sample = p.pid === null ? undefined : cpuSampler(p.pid);
const sessions = openSessions(p.port, p.sessions);
const body = frameMessage(Buffer.alloc(8));
const fullHeaders = grpcHeaders('/bench.Bench/Stream', { 'x-bench-count': String(p.count) });
const open = new Set<ClientHttp2Stream>();
const results: StreamWindowResult[] = [];
let current: Window | undefined;
let finished = false;
let callsFailed = 0;
/** Engine send time of the first message of the latest burst: the tick phase. */
let burstNs = 0n;

function startCall(slot: number, first: boolean): void {
  if (finished) return;
  const count = first ? 1 + Math.floor(Math.random() * p.count) : p.count;
  let req: ClientHttp2Stream;
  try {
    req = sessions[slot % sessions.length]!.request(first ? grpcHeaders('/bench.Bench/Stream', { 'x-bench-count': String(count) }) : fullHeaders);
  } catch {
    callsFailed++;
    return void setTimeout(() => startCall(slot, false), 10);
  }
  if (current) current.callsStarted++;
  open.add(req);
  let status: string | undefined;
  const reader = new GrpcFrameReader();
  req.on('response', (h) => (status = h['grpc-status'] as string | undefined));
  req.on('trailers', (t: IncomingHttpHeaders) => (status = t['grpc-status'] as string | undefined));
  req.on('data', (chunk: Buffer) => {
    for (const f of reader.push(chunk)) {
      if (f.kind !== 'message') continue;
      const now = nowNs();
      const m = f.payload;
      const sentNs = tokenTimestampNs(Buffer.from(m.buffer, m.byteOffset, m.byteLength));
      if (sentNs > burstNs + tickNs / 2n) burstNs = sentNs;
      if (!current) continue;
      current.messages++;
      current.latencies?.add(Number(now - sentNs) / 1000);
    }
  });
  req.on('error', () => {});
  req.on('close', () => {
    open.delete(req);
    if (finished) return;
    if (status === '0') {
      if (current) current.callsCompleted++;
    } else callsFailed++;
    startCall(slot, false);
  });
  req.end(body);
}

/** The first mid-gap moment (half a tick after a burst's start) at or after `ns`. */
function midGapAtOrAfter(ns: bigint): bigint {
  if (burstNs === 0n) return ns;
  let t = burstNs + tickNs / 2n;
  if (t < ns) t += ((ns - t + tickNs - 1n) / tickNs) * tickNs;
  return t;
}

function at(ns: bigint, fn: () => void): void {
  setTimeout(fn, Math.max(0, Number(ns - nowNs()) / 1e6));
}

function openWindow(cpuStart: CpuReading | undefined, startNs: bigint): void {
  current = {
    startNs,
    endNs: 0n,
    cpuStart,
    messages: 0,
    callsStarted: 0,
    callsCompleted: 0,
    latencies: p.warmup ? undefined : new Reservoir(300_000),
  };
  at(midGapAtOrAfter(startNs + BigInt(sliceTicks) * tickNs - tickNs / 2n), closeWindow);
}

function closeWindow(): void {
  const w = current!;
  const cpuEnd = sample?.();
  const endNs = cpuEnd?.atNs ?? nowNs();
  const cpu = w.cpuStart && cpuEnd ? cpuBetween(w.cpuStart, cpuEnd) : undefined;
  results.push({
    startNs: String(w.startNs),
    endNs: String(endNs),
    seconds: Number(endNs - w.startNs) / 1e9,
    messages: w.messages,
    callsStarted: w.callsStarted,
    callsCompleted: w.callsCompleted,
    cpuS: cpu?.seconds ?? null,
    cpuTickS: cpu?.tickSeconds ?? null,
    cpuUsPerMsg: cpu && w.messages ? (cpu.seconds * 1e6) / w.messages : null,
    latencyUs: w.latencies ? distribution(w.latencies.values()) : null,
  });
  current = undefined;
  const series = results.map((r) => r.cpuUsPerMsg ?? NaN);
  if (p.warmup && wantsAnotherSlice(series, p.warmup, sample !== undefined)) openWindow(cpuEnd, endNs);
  else finish();
}

function finish(): void {
  finished = true;
  for (const req of open) req.close(constants.NGHTTP2_CANCEL);
  for (const s of sessions) s.destroy();
  let settled: boolean | null = null;
  if (p.warmup && sample)
    settled = !wantsAnotherSlice(
      results.map((r) => r.cpuUsPerMsg ?? NaN),
      { ...p.warmup, maxSlices: Infinity },
      true,
    );
  const result: StreamClientResult = { windows: results, settled, aligned: alignedAtStart, callsFailed };
  emit(result);
  setTimeout(() => process.exit(0), 50);
}

let alignedAtStart = false;
for (let i = 0; i < p.concurrency; i++) startCall(i, true);
setTimeout(() => {
  alignedAtStart = burstNs !== 0n;
  at(midGapAtOrAfter(nowNs()), () => {
    const cpuStart = sample?.();
    openWindow(cpuStart, cpuStart?.atNs ?? nowNs());
  });
}, p.leadMs);
