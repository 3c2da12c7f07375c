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
 *
 * The client shares a core with the upstream, so its own cost per message shows in every
 * target's latency: frames are read in place from each DATA chunk (one clock read per chunk,
 * no per-message objects or BigInts), which keeps its garbage, and so its GC pauses, small.
 */
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { TOKEN_MESSAGE_BYTES, tokenSentNs } from '../lib/grpc-frame.js';
import { cpuBetween, cpuSampler, type CpuReading } from '../lib/proc.js';
import { hasSettled, wantsAnotherSlice, type SettleRule } from '../lib/settle.js';
import { distribution, Reservoir, type Distribution } from '../lib/stats.js';
import { emit, exitAfter, grpcHeaders, openSessions, readParams } from './common.js';

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

/** CLOCK_MONOTONIC ns as a number (see tokenSentNs). */
const nowNs = (): number => Number(process.hrtime.bigint());

interface Window {
  startNs: number;
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
const tickNs = Math.round(p.tickMs * 1e6);
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
let burstNs = 0;

function onMessage(sentNs: number, now: number): void {
  if (sentNs > burstNs + tickNs / 2) burstNs = sentNs;
  if (!current) return;
  current.messages++;
  current.latencies?.add((now - sentNs) / 1000);
}

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
  /** The start of a gRPC frame split across DATA chunks. */
  let carry: Buffer | undefined;
  req.on('response', (h) => (status = h['grpc-status'] as string | undefined));
  req.on('trailers', (t: IncomingHttpHeaders) => (status = t['grpc-status'] as string | undefined));
  req.on('data', (chunk: Buffer) => {
    const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
    carry = undefined;
    const now = nowNs();
    let off = 0;
    while (buf.length - off >= 5) {
      const len = buf.readUInt32BE(off + 1);
      if (buf.length - off < 5 + len) break;
      if (len >= TOKEN_MESSAGE_BYTES) onMessage(tokenSentNs(buf, off + 5), now);
      off += 5 + len;
    }
    if (off < buf.length) carry = buf.subarray(off);
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
function midGapAtOrAfter(ns: number): number {
  if (burstNs === 0) return ns;
  let t = burstNs + tickNs / 2;
  if (t < ns) t += Math.ceil((ns - t) / tickNs) * tickNs;
  return t;
}

function at(ns: number, fn: () => void): void {
  setTimeout(fn, Math.max(0, (ns - nowNs()) / 1e6));
}

function openWindow(cpuStart: CpuReading | undefined, startNs: number): void {
  current = {
    startNs,
    cpuStart,
    messages: 0,
    callsStarted: 0,
    callsCompleted: 0,
    latencies: p.warmup ? undefined : new Reservoir(300_000),
  };
  at(midGapAtOrAfter(startNs + sliceTicks * tickNs - tickNs / 2), closeWindow);
}

function closeWindow(): void {
  const w = current!;
  const cpuEnd = sample?.();
  const endNs = cpuEnd ? Number(cpuEnd.atNs) : nowNs();
  const cpu = w.cpuStart && cpuEnd ? cpuBetween(w.cpuStart, cpuEnd) : undefined;
  results.push({
    startNs: String(Math.round(w.startNs)),
    endNs: String(Math.round(endNs)),
    seconds: (endNs - w.startNs) / 1e9,
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
  const settled =
    p.warmup && sample
      ? hasSettled(
          results.map((r) => r.cpuUsPerMsg ?? NaN),
          p.warmup,
        )
      : null;
  const result: StreamClientResult = { windows: results, settled, aligned: alignedAtStart, callsFailed };
  emit(result);
  setTimeout(() => process.exit(0), 50);
}

let alignedAtStart = false;
for (let i = 0; i < p.concurrency; i++) startCall(i, true);
setTimeout(() => {
  alignedAtStart = burstNs !== 0;
  at(midGapAtOrAfter(nowNs()), () => {
    const cpuStart = sample?.();
    openWindow(cpuStart, cpuStart ? Number(cpuStart.atNs) : nowNs());
  });
}, p.leadMs);
