/**
 * Token-streaming load client: keeps `concurrency` server-streaming calls open (a finished
 * call is replaced at once), reads every one-token message, and records per-message latency =
 * client receive time - engine send time (both CLOCK_MONOTONIC). Only messages received inside
 * the measurement window count; at its end every open call is cancelled.
 */
import { constants, type IncomingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { GrpcFrameReader } from '../../src/protocol/grpc/grpc-frames.js';
import { tokenTimestampNs } from '../lib/grpc-frame.js';
import { distribution, Reservoir } from '../lib/stats.js';
import { emit, exitAfter, grpcHeaders, nowNs, openSessions, readParams } from './common.js';

interface Params {
  port: number;
  concurrency: number;
  sessions: number;
  count: number;
  intervalMs: number;
  warmupMs: number;
  durationMs: number;
}

const p = readParams<Params>();
exitAfter(p.warmupMs + p.durationMs + 15_000);
const sessions = openSessions(p.port, p.sessions);
const body = frameMessage(Buffer.alloc(8));
const headers = grpcHeaders('/bench.Bench/Stream', { 'x-bench-count': String(p.count), 'x-bench-interval-ms': String(p.intervalMs) });
const latencies = new Reservoir(300_000);
const start = nowNs();
const measureFrom = start + BigInt(p.warmupMs) * 1_000_000n;
const measureTo = measureFrom + BigInt(p.durationMs) * 1_000_000n;
let measuring = false;
let finished = false;
let messages = 0;
let calls = 0;
let callsOk = 0;
let callsFailed = 0;
const open = new Set<import('node:http2').ClientHttp2Stream>();

function startCall(slot: number): void {
  if (finished) return;
  const session = sessions[slot % sessions.length]!;
  let req: import('node:http2').ClientHttp2Stream;
  try {
    req = session.request(headers);
  } catch {
    callsFailed++;
    return void setTimeout(() => startCall(slot), 10);
  }
  calls++;
  open.add(req);
  let status: string | undefined;
  const reader = new GrpcFrameReader();
  const onMessage = (message: Uint8Array): void => {
    if (!measuring) return;
    const now = nowNs();
    if (now > measureTo) return;
    messages++;
    latencies.add(Number(now - tokenTimestampNs(Buffer.from(message.buffer, message.byteOffset, message.byteLength))) / 1000);
  };
  req.on('response', (h) => (status = h['grpc-status'] as string | undefined));
  req.on('trailers', (t: IncomingHttpHeaders) => (status = t['grpc-status'] as string | undefined));
  req.on('data', (chunk: Buffer) => {
    for (const f of reader.push(chunk)) if (f.kind === 'message') onMessage(f.payload);
  });
  req.on('error', () => {});
  req.on('close', () => {
    open.delete(req);
    if (finished) return;
    if (status === '0') callsOk++;
    else callsFailed++;
    startCall(slot);
  });
  req.end(body);
}

for (let i = 0; i < p.concurrency; i++) startCall(i);
setTimeout(() => (measuring = true), p.warmupMs);
setTimeout(() => {
  finished = true;
  for (const req of open) req.close(constants.NGHTTP2_CANCEL);
  for (const s of sessions) s.destroy();
  const seconds = p.durationMs / 1000;
  emit({ messages, seconds, messagesPerSec: messages / seconds, calls, callsOk, callsFailed, latencyUs: distribution(latencies.values()) });
  setTimeout(() => process.exit(0), 50);
}, p.warmupMs + p.durationMs);
