/**
 * Open-loop overload client: issues unary calls at a fixed rate whatever the answers, and
 * records for each call how long until it was answered and how: OK (grpc-status 0), rejected
 * (grpc-status 8 RESOURCE_EXHAUSTED, or HTTP 503 from HAProxy/nginx), or other.
 */
import { constants, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { distribution, Reservoir } from '../lib/stats.js';
import { emit, exitAfter, grpcHeaders, nowNs, openSessions, readParams } from './common.js';

interface Params {
  port: number;
  ratePerSec: number;
  durationMs: number;
  holdMs: number;
  sessions: number;
}

const p = readParams<Params>();
exitAfter(p.durationMs + p.holdMs * 20 + 15_000);
const sessions = openSessions(p.port, p.sessions);
const body = frameMessage(Buffer.alloc(100, 0x61));
const headers = grpcHeaders('/bench.Bench/Slow', { 'x-bench-hold-ms': String(p.holdMs) });
const rejectUs = new Reservoir(100_000);
const okUs = new Reservoir(100_000);
const counts = { sent: 0, ok: 0, rejected: 0, other: 0, unfinished: 0 };
const otherKinds: Record<string, number> = {};
const open = new Set<ClientHttp2Stream>();

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

// Fire in 5 ms ticks, carrying the fractional remainder, so the rate holds at any value.
let issued = 0;
let finishing = false;
const t0 = Date.now();
const ticker = setInterval(() => {
  const due = Math.min(Math.floor(((Date.now() - t0) / 1000) * p.ratePerSec), Math.ceil((p.durationMs / 1000) * p.ratePerSec));
  for (; issued < due; issued++) send(issued);
  if (Date.now() - t0 >= p.durationMs) {
    clearInterval(ticker);
    void drain();
  }
}, 5);

async function drain(): Promise<void> {
  const seconds = (Date.now() - t0) / 1000;
  // Let admitted and queued calls finish (bounded), then cut the rest.
  const until = Date.now() + p.holdMs * 10 + 2000;
  while (open.size && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  finishing = true;
  counts.unfinished = open.size;
  for (const req of open) req.close(constants.NGHTTP2_CANCEL);
  for (const s of sessions) s.destroy();
  emit({
    ...counts,
    seconds,
    offeredPerSec: counts.sent / seconds,
    rejectedPerSec: counts.rejected / seconds,
    okPerSec: counts.ok / seconds,
    otherKinds,
    rejectLatencyUs: distribution(rejectUs.values()),
    okLatencyUs: distribution(okUs.values()),
  });
  setTimeout(() => process.exit(0), 50);
}
