/**
 * Open-loop unary gRPC load client for the overload scenario. Unlike h2load, which only sees
 * :status, it reads each call's grpc-status (from the trailers, or from a Trailers-Only answer's
 * headers), so a call is classified by what the proxy answered, not by how fast the answer came:
 * ok = :status 200 and grpc-status 0; rejected = :status 503 (HAProxy, nginx) or grpc-status 8
 * RESOURCE_EXHAUSTED (the sidecar); anything else is "other".
 *
 * It speaks HTTP/2 itself over a plain socket (frames and HPACK from test/support/h2-wire.ts, the hostile-input tests' wire layer) rather
 * than through node:http2: every node:http2 stream is a native-backed object that survives the
 * next scavenge, so at 1,600 calls/s a node:http2 client stalls 5-30 ms in scavenges several
 * times a second, which showed in its own p99 (7-19 ms against a rejecter that costs nothing,
 * where h2load measured 1-5 ms). Here a call is a few numbers in preallocated typed arrays.
 *
 * Stepped: started once, it reads one JSON run command per stdin line ({"port","pid","durationMs"})
 * and answers each with one JSON line ({"run":k,...}). A run reads the proxy's CPU (/proc, see
 * bench/lib/proc.ts), opens `connections` connections, starts calls at `rpsPerConnection` per
 * connection (at most `streamsPerConnection`, or the server's limit, in flight on one; the excess
 * waits, as h2load's --rps does) for `durationMs`, then waits for every call it started to end
 * (bounded by drainMs), closes the connections and reads the proxy's CPU again 50 ms later.
 * Every call started is accounted for, so the rejections counted are the ones the proxy sent.
 *
 * Time per call: CLOCK_MONOTONIC from just before its frames are written to the arrival of the
 * frame that ends its answer (one clock read per socket read).
 */
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { frameMessage } from '../../src/protocol/grpc/framing.js';
import { cpuBetween, cpuSampler } from '../lib/proc.js';
import { distribution, type Distribution } from '../lib/stats.js';
import {
  DEFAULT_WINDOW,
  encodeHeaders,
  ErrorCode,
  Flags,
  frame,
  FrameType,
  HpackDecoder,
  PREFACE,
  Setting,
  settingsFrame,
  windowUpdateFrame,
} from '../../test/support/h2-wire.js';
import { emit, grpcHeaders, readParams } from './common.js';

interface Params {
  path: string;
  bodyBytes: number;
  headers: Record<string, string>;
  connections: number;
  streamsPerConnection: number;
  rpsPerConnection: number;
  /** Most time to wait, after the last call started, for the calls still open. */
  drainMs: number;
}

export interface UnaryRunCommand {
  port: number;
  /** Root pid of the proxy, or null (nothing to measure). */
  pid: number | null;
  durationMs: number;
}

export interface UnaryRunResult {
  run: number;
  /** Calls started within the run's duration. */
  started: number;
  ok: number;
  rejected: number;
  /** Answers that are neither ok nor a rejection, and calls that ended without an answer. */
  other: number;
  /** Of `other`: calls that ended with no answer (stream reset, connection lost). */
  errored: number;
  /** Of `other`: calls still open after drainMs (then cancelled). */
  unfinished: number;
  /** Calls that had to wait for a free stream on their connection before they could start. */
  deferred: number;
  /** Answers by ":status/grpc-status" ("200/8", "503/-"). */
  codes: Record<string, number>;
  rejectUs: Distribution;
  okUs: Distribution;
  /** Proxy CPU between the edges (s), precise and tick-based; null without a pid. */
  cpuS: number | null;
  cpuTickS: number | null;
}

const p = readParams<Params>();
const nowNs = (): number => Number(process.hrtime.bigint());
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const { DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION } = FrameType;
const { END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY } = Flags;
/** Our receive windows: far above what a run's answers carry, so no WINDOW_UPDATE is ever due. */
const STREAM_WINDOW = 1 << 20;
const CONNECTION_WINDOW = 2 ** 31 - 1;

const body = frameMessage(Buffer.alloc(p.bodyBytes, 0x61));

/** One request's HEADERS + DATA frames for a run: only the stream id (at two offsets) differs between requests. */
interface RequestFrames {
  readonly template: Buffer;
  /** Offset of the DATA frame. */
  readonly dataAt: number;
}

function requestFrames(port: number): RequestFrames {
  const { ':method': method, ':path': path, ...rest } = grpcHeaders(p.path, p.headers);
  const block = encodeHeaders(Object.entries({ ':method': method!, ':scheme': 'http', ':authority': `127.0.0.1:${port}`, ':path': path!, ...rest }));
  return { template: Buffer.concat([frame(HEADERS, END_HEADERS, 0, block), frame(DATA, END_STREAM, 0, body)]), dataAt: 9 + block.length };
}

const OK = 0;
const REJECTED = 1;
const OTHER = 2;
/** Ended without a complete answer: reset, or its connection lost. */
const ERRORED = 3;
/** kinds[] before the call has ended. */
const OPEN = 255;

/** Per-call records of one run, indexed by call number. */
interface Calls {
  readonly t0: Float64Array;
  readonly elapsedUs: Float64Array;
  readonly kinds: Uint8Array;
  readonly httpStatus: Uint16Array;
  /** grpc-status, -1 while none was seen. */
  readonly grpcStatus: Int16Array;
}

class Connection {
  private readonly socket: Socket;
  private readonly decoder = new HpackDecoder();
  private readonly streams = new Map<number, number>();
  private nextStreamId = 1;
  private peerMaxStreams = Infinity;
  private sendWindow = 65_535;
  private peerStreamWindow = 65_535;
  /** Stream ids whose DATA waits for connection window. */
  private readonly blocked: number[] = [];
  private pending: Buffer | undefined;
  private fragments: Buffer[] | undefined;
  private fragmentStream = 0;
  private fragmentEnd = false;
  private goneAway = false;
  private closed = false;
  private seenSettings: (() => void) | undefined;
  private failed: ((err: Error) => void) | undefined;
  private readonly closedPromise: Promise<void>;

  constructor(
    port: number,
    private readonly request: RequestFrames,
    private readonly calls: Calls,
    private readonly ended: (conn: Connection, id: number) => void,
  ) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.setNoDelay(true);
    this.closedPromise = new Promise((resolve) => this.socket.once('close', () => resolve()));
    this.socket.on('error', (err) => this.failed?.(err));
    this.socket.on('close', () => this.lost());
    this.socket.on('data', (chunk: Buffer) => this.read(chunk));
    const settings = settingsFrame([
      [Setting.ENABLE_PUSH, 0],
      [Setting.INITIAL_WINDOW_SIZE, STREAM_WINDOW],
    ]);
    this.socket.write(Buffer.concat([PREFACE, settings, windowUpdateFrame(0, CONNECTION_WINDOW - DEFAULT_WINDOW)]));
  }

  /** Resolves once the server's SETTINGS arrived (its stream limit is known). */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.seenSettings = resolve;
      this.failed = reject;
    });
  }

  get inFlight(): number {
    return this.streams.size;
  }

  /** Whether another call can start now (below our and the server's stream limit). */
  get hasRoom(): boolean {
    return !this.goneAway && !this.closed && this.streams.size < Math.min(p.streamsPerConnection, this.peerMaxStreams);
  }

  start(id: number): boolean {
    if (!this.hasRoom) return false;
    const streamId = this.nextStreamId;
    this.nextStreamId += 2;
    const { template, dataAt } = this.request;
    const frames = Buffer.allocUnsafe(template.length);
    template.copy(frames);
    frames.writeUInt32BE(streamId, 5);
    frames.writeUInt32BE(streamId, dataAt + 5);
    this.streams.set(streamId, id);
    this.calls.t0[id] = nowNs();
    if (body.length > this.peerStreamWindow) throw new Error(`the server's stream window (${this.peerStreamWindow} B) is below one request body`);
    if (this.sendWindow >= body.length && this.blocked.length === 0) {
      this.sendWindow -= body.length;
      this.socket.write(frames);
    } else {
      this.socket.write(frames.subarray(0, dataAt));
      this.blocked.push(streamId);
    }
    return true;
  }

  cork(): void {
    this.socket.cork();
  }

  uncork(): void {
    this.socket.uncork();
  }

  /** Cancels the calls still open, says goodbye and waits for the socket to close. */
  async close(): Promise<void> {
    if (!this.closed) {
      const cancel = Buffer.alloc(4);
      cancel.writeUInt32BE(ErrorCode.CANCEL, 0);
      for (const streamId of this.streams.keys()) this.socket.write(frame(RST_STREAM, 0, streamId, cancel));
      this.socket.end(frame(GOAWAY, 0, 0, Buffer.alloc(8)));
    }
    await this.closedPromise;
  }

  private read(chunk: Buffer): void {
    const now = nowNs();
    const buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = undefined;
    let off = 0;
    while (buf.length - off >= 9) {
      const len = buf.readUIntBE(off, 3);
      if (buf.length - off < 9 + len) break;
      const type = buf[off + 3]!;
      const flags = buf[off + 4]!;
      const streamId = buf.readUInt32BE(off + 5) & 0x7fffffff;
      this.onFrame(type, flags, streamId, buf.subarray(off + 9, off + 9 + len), now);
      off += 9 + len;
    }
    if (off < buf.length) this.pending = Buffer.from(buf.subarray(off));
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer, now: number): void {
    switch (type) {
      case DATA:
        if (flags & END_STREAM) this.end(streamId, now);
        return;
      case HEADERS: {
        let start = 0;
        let end = payload.length;
        if (flags & PADDED) {
          end -= payload[0]!;
          start = 1;
        }
        if (flags & PRIORITY) start += 5;
        const fragment = payload.subarray(start, end);
        if (flags & END_HEADERS) return this.headers(streamId, fragment, (flags & END_STREAM) !== 0, now);
        this.fragments = [Buffer.from(fragment)];
        this.fragmentStream = streamId;
        this.fragmentEnd = (flags & END_STREAM) !== 0;
        return;
      }
      case CONTINUATION:
        if (!this.fragments || streamId !== this.fragmentStream) throw new Error('http2: unexpected CONTINUATION');
        this.fragments.push(Buffer.from(payload));
        if (flags & END_HEADERS) {
          const block = Buffer.concat(this.fragments);
          this.fragments = undefined;
          this.headers(streamId, block, this.fragmentEnd, now);
        }
        return;
      case RST_STREAM:
        return this.end(streamId, now, true);
      case SETTINGS:
        if (flags & ACK) return;
        for (let i = 0; i + 6 <= payload.length; i += 6) {
          const id = payload.readUInt16BE(i);
          const value = payload.readUInt32BE(i + 2);
          if (id === Setting.MAX_CONCURRENT_STREAMS) this.peerMaxStreams = value;
          else if (id === Setting.INITIAL_WINDOW_SIZE) this.peerStreamWindow = value;
        }
        this.socket.write(frame(SETTINGS, ACK, 0));
        this.seenSettings?.();
        this.seenSettings = undefined;
        return;
      case PING:
        if (!(flags & ACK)) this.socket.write(frame(PING, ACK, 0, payload));
        return;
      case GOAWAY: {
        this.goneAway = true;
        const last = payload.readUInt32BE(0) & 0x7fffffff;
        for (const id of [...this.streams.keys()]) if (id > last) this.end(id, now, true);
        return;
      }
      case WINDOW_UPDATE:
        if (streamId !== 0) return; // stream windows: one small DATA per stream always fits
        this.sendWindow += payload.readUInt32BE(0) & 0x7fffffff;
        while (this.blocked.length && this.sendWindow >= body.length) {
          const id = this.blocked.shift()!;
          this.sendWindow -= body.length;
          if (!this.streams.has(id)) continue;
          const data = Buffer.from(this.request.template.subarray(this.request.dataAt));
          data.writeUInt32BE(id, 5);
          this.socket.write(data);
        }
        return;
      default:
        return; // PRIORITY, unknown types: nothing to do
    }
  }

  private headers(streamId: number, block: Buffer, endStream: boolean, now: number): void {
    // Every block is decoded, known stream or not: the dynamic table depends on all of them.
    const fields = this.decoder.decode(block);
    const id = this.streams.get(streamId);
    if (id === undefined) return;
    let status = 0;
    let grpcStatus = -1;
    for (const [name, value] of fields) {
      if (name === ':status') status = Number(value);
      else if (name === 'grpc-status') grpcStatus = Number(value);
    }
    const calls = this.calls;
    if (calls.httpStatus[id] === 0 && status >= 200) calls.httpStatus[id] = status;
    if (grpcStatus >= 0) calls.grpcStatus[id] = grpcStatus;
    if (endStream) this.end(streamId, now);
  }

  /** The stream ended: with its answer complete, or reset / lost (errored). */
  private end(streamId: number, now: number, errored = false): void {
    const id = this.streams.get(streamId);
    if (id === undefined) return;
    this.streams.delete(streamId);
    const calls = this.calls;
    calls.elapsedUs[id] = (now - calls.t0[id]!) / 1000;
    calls.kinds[id] = errored ? ERRORED : classify(calls.httpStatus[id]!, calls.grpcStatus[id]!);
    this.ended(this, id);
  }

  private lost(): void {
    this.closed = true;
    this.failed?.(new Error('connection closed before the server sent its SETTINGS'));
    const now = nowNs();
    for (const streamId of [...this.streams.keys()]) this.end(streamId, now, true);
  }
}

function classify(httpStatus: number, grpcStatus: number): number {
  if (httpStatus === 503) return REJECTED;
  if (httpStatus !== 200) return OTHER;
  if (grpcStatus === 8) return REJECTED;
  return grpcStatus === 0 ? OK : OTHER;
}

let runs = 0;

async function run(cmd: UnaryRunCommand): Promise<UnaryRunResult> {
  const capacity = Math.ceil((p.rpsPerConnection * p.connections * cmd.durationMs) / 1000) + 64 * p.connections;
  const calls: Calls = {
    t0: new Float64Array(capacity),
    elapsedUs: new Float64Array(capacity),
    kinds: new Uint8Array(capacity).fill(OPEN),
    httpStatus: new Uint16Array(capacity),
    grpcStatus: new Int16Array(capacity).fill(-1),
  };
  let started = 0;
  let ended = 0;
  let deferred = 0;
  let stopped = false;
  let allEnded: (() => void) | undefined;
  const waiting = new Map<Connection, number>();

  const startOn = (conn: Connection): boolean => {
    if (started >= capacity || !conn.start(started)) return false;
    started++;
    return true;
  };
  const onEnded = (conn: Connection): void => {
    ended++;
    const queued = waiting.get(conn) ?? 0;
    if (queued > 0 && !stopped && startOn(conn)) waiting.set(conn, queued - 1);
    if (stopped && ended === started) allEnded?.();
  };

  const sample = cmd.pid === null ? undefined : cpuSampler(cmd.pid);
  const c0 = sample?.();
  const request = requestFrames(cmd.port);
  const conns = Array.from({ length: p.connections }, () => new Connection(cmd.port, request, calls, onEnded));
  await Promise.all(conns.map((c) => c.ready()));
  for (const c of conns) waiting.set(c, 0);

  // Open loop: connection c's k-th call is due at t0 + (k + c / connections) / rps.
  const intervalNs = 1e9 / p.rpsPerConnection;
  const due = new Array<number>(p.connections).fill(0);
  const t0 = nowNs();
  const endNs = t0 + cmd.durationMs * 1e6;
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      const now = Math.min(nowNs(), endNs);
      for (let c = 0; c < conns.length; c++) {
        const conn = conns[c]!;
        conn.cork();
        while (t0 + (due[c]! + c / conns.length) * intervalNs < now) {
          due[c]!++;
          if (!startOn(conn)) {
            waiting.set(conn, waiting.get(conn)! + 1);
            deferred++;
          }
        }
        conn.uncork();
      }
      if (now >= endNs) {
        clearInterval(timer);
        resolve();
      }
    };
    const timer = setInterval(pump, 1);
    pump();
  });
  // Calls still waiting for a stream at the end never started (h2load would not have sent them either).
  stopped = true;
  if (ended < started) {
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      allEnded = resolve;
      timer = setTimeout(resolve, p.drainMs);
    });
    clearTimeout(timer);
  }
  const stillOpen: number[] = [];
  for (let i = 0; i < started; i++) if (calls.kinds[i] === OPEN) stillOpen.push(i);
  await Promise.all(conns.map((c) => c.close()));
  // Cancelled by close() (an answer may still have slipped in just before).
  const unfinished = stillOpen.filter((i) => calls.kinds[i] === ERRORED).length;
  await sleep(50);
  const c1 = sample?.();
  const cpu = c0 && c1 ? cpuBetween(c0, c1) : undefined;

  const rejectUs: number[] = [];
  const okUs: number[] = [];
  const codes: Record<string, number> = {};
  let errored = 0;
  for (let i = 0; i < started; i++) {
    const kind = calls.kinds[i];
    if (kind === REJECTED) rejectUs.push(calls.elapsedUs[i]!);
    else if (kind === OK) okUs.push(calls.elapsedUs[i]!);
    else if (kind === ERRORED) {
      errored++;
      continue;
    }
    const key = `${calls.httpStatus[i]}/${calls.grpcStatus[i]! >= 0 ? calls.grpcStatus[i] : '-'}`;
    codes[key] = (codes[key] ?? 0) + 1;
  }
  return {
    run: ++runs,
    started,
    ok: okUs.length,
    rejected: rejectUs.length,
    other: started - okUs.length - rejectUs.length,
    // The unfinished ones were reset by the client (ERRORED too), but are counted apart.
    errored: errored - unfinished,
    unfinished,
    deferred,
    codes,
    rejectUs: distribution(rejectUs),
    okUs: distribution(okUs),
    cpuS: cpu?.seconds ?? null,
    cpuTickS: cpu?.tickSeconds ?? null,
  };
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  emit(await run(JSON.parse(line) as UnaryRunCommand));
}
process.exit(0);
