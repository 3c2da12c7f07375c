/**
 * Open-loop overload client: issues unary calls at a fixed rate whatever the answers, and
 * records for each call how long until it was answered and how: OK (grpc-status 0), rejected
 * (grpc-status 8 RESOURCE_EXHAUSTED, or HTTP 503 from HAProxy/nginx), or other.
 *
 * Measure mode: once its connections are up it reads the proxy tree's CPU (/proc), offers load
 * for windowMs, waits until every call has been answered, and reads the CPU again: the window
 * holds all the work for the calls it offered and nothing else (the proxy is idle at both edges).
 * Warm-up mode: offers without pause and reads the CPU every slice, until two consecutive slices'
 * CPU per rejection agree (bench/lib/settle.ts).
 */
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { cpuBetween, cpuSampler, type CpuReading } from '../lib/proc.js';
import { wantsAnotherSlice, type SettleRule } from '../lib/settle.js';
import { distribution, Reservoir, type Distribution } from '../lib/stats.js';
import { emit, exitAfter, grpcHeaders, nowNs, openSessions, readParams } from './common.js';

interface Params {
  port: number;
  ratePerSec: number;
  windowMs: number;
  holdMs: number;
  sessions: number;
  pid: number | null;
  warmup: SettleRule | null;
}

export interface OverloadClientResult {
  sent: number;
  ok: number;
  rejected: number;
  other: number;
  unfinished: number;
  /** Offering time, s. */
  seconds: number;
  /** Edge to edge (offering + answers of the last calls), s. */
  windowS: number;
  cpuS: number | null;
  cpuTickS: number | null;
  offeredPerSec: number;
  rejectedPerSec: number;
  okPerSec: number;
  otherKinds: Record<string, number>;
  rejectLatencyUs: Distribution;
  okLatencyUs: Distribution;
  /** Warm-up mode: CPU us per rejection of each slice, and whether they settled. */
  slices: number[];
  settled: boolean | null;
}

const p = readParams<Params>();
const maxMs = p.warmup ? p.warmup.maxSlices * p.warmup.sliceMs : p.windowMs;
exitAfter(maxMs + p.holdMs * 20 + 20_000);
const sample = p.pid === null ? undefined : cpuSampler(p.pid);
const sessions = openSessions(p.port, p.sessions);
const body = frameMessage(Buffer.alloc(100, 0x61));
const headers = grpcHeaders('/bench.Bench/Slow', { 'x-bench-hold-ms': String(p.holdMs) });
const rejectUs = new Reservoir(100_000);
const okUs = new Reservoir(100_000);
const counts = { sent: 0, ok: 0, rejected: 0, other: 0, unfinished: 0 };
const otherKinds: Record<string, number> = {};
const open = new Set<ClientHttp2Stream>();
let finishing = false;

function send(i: number): void {
  const started = nowNs();
  let req: ClientHttp2Stream;
  try {
    req = sessions[i % sessions.length]!.request(headers);
  } catch {
    counts.other++;
    otherKinds['request-throw'] = (otherKinds['request-throw'] ?? 0) + 1;
    return;
  }
  counts.sent++;
  open.add(req);
  let done = false;
  const finish = (kind: string): void => {
    if (done) return;
    done = true;
    const us = Number(nowNs() - started) / 1000;
    if (kind === 'grpc-0') {
      counts.ok++;
      okUs.add(us);
    } else if (kind === 'grpc-8' || kind === 'http-503') {
      counts.rejected++;
      rejectUs.add(us);
    } else {
      counts.other++;
      otherKinds[kind] = (otherKinds[kind] ?? 0) + 1;
    }
  };
  req.on('response', (h) => {
    const status = Number(h[':status']);
    if (status !== 200) return finish(`http-${status}`);
    if (h['grpc-status'] !== undefined) finish(`grpc-${h['grpc-status'] as string}`);
  });
  req.on('trailers', (t: IncomingHttpHeaders) => finish(`grpc-${t['grpc-status'] as string}`));
  req.on('data', () => {});
  req.on('error', () => {});
  req.on('close', () => {
    open.delete(req);
    if (!done && !finishing) finish(`closed-${req.rstCode ?? 0}`);
  });
  req.end(body);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Offers load in 5 ms ticks, carrying the fractional remainder, so the rate holds at any value. */
function offer(shouldStop: (elapsedMs: number) => boolean): Promise<number> {
  return new Promise((resolve) => {
    let issued = 0;
    const t0 = Date.now();
    const ticker = setInterval(() => {
      const elapsed = Date.now() - t0;
      const due = Math.floor((elapsed / 1000) * p.ratePerSec);
      for (; issued < due; issued++) send(issued);
      if (shouldStop(elapsed)) {
        clearInterval(ticker);
        resolve(elapsed / 1000);
      }
    }, 5);
  });
}

async function main(): Promise<void> {
  await Promise.all(sessions.map((s) => new Promise<void>((resolve) => (s.connecting ? s.once('connect', () => resolve()) : resolve()))));
  await sleep(50); // SETTINGS exchanged: the proxy is idle at the first edge
  const slices: number[] = [];
  let cpuStart: CpuReading | undefined = sample?.();
  const windowStart = nowNs();
  let seconds: number;
  if (p.warmup) {
    const rule = p.warmup;
    let sliceStart = cpuStart;
    let rejectedAtSliceStart = 0;
    let nextSliceAt = rule.sliceMs;
    seconds = await offer((elapsed) => {
      if (elapsed < nextSliceAt) return false;
      nextSliceAt += rule.sliceMs;
      const now = sample?.();
      const rejected = counts.rejected - rejectedAtSliceStart;
      slices.push(now && sliceStart && rejected ? (cpuBetween(sliceStart, now).seconds * 1e6) / rejected : NaN);
      sliceStart = now;
      rejectedAtSliceStart = counts.rejected;
      return !wantsAnotherSlice(slices, rule, sample !== undefined);
    });
    cpuStart = undefined; // a warm-up has no whole-window figure
  } else {
    seconds = await offer((elapsed) => elapsed >= p.windowMs);
    // Let admitted and queued calls finish (bounded); the window ends when the last is answered.
    const until = Date.now() + p.holdMs * 10 + 2000;
    while (open.size && Date.now() < until) await sleep(5);
    await sleep(50);
  }
  const cpuEnd = cpuStart ? sample?.() : undefined;
  const windowS = Number(nowNs() - windowStart) / 1e9;
  finishing = true;
  counts.unfinished = open.size;
  for (const req of open) req.close(constants.NGHTTP2_CANCEL);
  for (const s of sessions) s.destroy();
  const cpu = cpuStart && cpuEnd ? cpuBetween(cpuStart, cpuEnd) : undefined;
  const settled = p.warmup && sample ? !wantsAnotherSlice(slices, { ...p.warmup, maxSlices: Infinity }, true) : null;
  const result: OverloadClientResult = {
    ...counts,
    seconds,
    windowS,
    cpuS: cpu?.seconds ?? null,
    cpuTickS: cpu?.tickSeconds ?? null,
    offeredPerSec: counts.sent / seconds,
    rejectedPerSec: counts.rejected / seconds,
    okPerSec: counts.ok / seconds,
    otherKinds,
    rejectLatencyUs: distribution(rejectUs.values()),
    okLatencyUs: distribution(okUs.values()),
    slices,
    settled,
  };
  emit(result);
  setTimeout(() => process.exit(0), 50);
}

void main();
