/**
 * dynamo.sidecar.v1.WorkerLoad/Watch, answered by the sidecar itself on its ingress port: the
 * broker-less way for a frontend to follow this worker's load (proto/dynamo/sidecar/v1/
 * worker_load.proto). Like grpc.health.v1 (health-service.ts) it never takes an admission slot,
 * never reaches the engine, is not counted in the proxied-call metrics, and is served while
 * draining too (the ranks then say draining=true).
 *
 * What a watcher gets, one WorkerLoadUpdate (every dp rank, taken at the same moment) each time:
 * - the current load at once;
 * - on every change, debounced LOAD_DEBOUNCE_MS like the NATS publisher (a burst of changes is
 *   one update);
 * - at once on publishNow() (the first rejection of a burst; the start of a drain);
 * - at least every `heartbeatMs` even when nothing changed, so a frontend can tell a silent
 *   sidecar (gone, partitioned) from an idle one.
 * `sequence` counts the updates sent on that stream (1, 2, 3, ...); the NATS events keep their
 * own per-rank count.
 *
 * Back-pressure: each watcher has at most one update in flight. Until node has handed the last
 * one to HTTP/2 (its write callback, which waits for the client's flow-control window), later
 * updates for that watcher are skipped (counted) and the latest state is sent when it goes; an
 * update is a full snapshot, so only intermediate states are lost. A watcher that never reads
 * costs one buffered update, not a queue, and one that reads slowly never reads a backlog of
 * stale updates first.
 *
 * End: the client cancelling removes the watcher at once. close() (sidecar shutdown) ends every
 * stream with UNAVAILABLE "sidecar shutting down" after what is already written, never OK: a
 * Watch has no natural end, and UNAVAILABLE is the status a frontend already treats as "this
 * worker is gone, reconnect or route elsewhere". Timers and the tracker subscription exist only
 * while at least one watcher is open.
 */
import { join } from 'node:path';
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { LOAD_DEBOUNCE_MS } from '../config/sidecar-config.js';
import { frameMessage, readSingleMessage } from '../../protocol/grpc/framing.js';
import { respondTrailersOnly, statusTrailers, trailersOnlyHeaders } from '../../protocol/grpc/respond.js';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import { PROTO_DIR } from '../../protocol/proto-path.js';
import type { LoadEvent } from '../../protocol/load-event.js';

const PACKAGE = 'dynamo.sidecar.v1';
export const WORKER_LOAD_SERVICE = `${PACKAGE}.WorkerLoad`;
export const WORKER_LOAD_WATCH_PATH = `/${WORKER_LOAD_SERVICE}/Watch`;
export const SHUTDOWN_MESSAGE = 'sidecar shutting down';

const MAX_REQUEST_BYTES = 64 * 1024;
const { HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE } = constants;

/** What the service reads: the tracker's current events and its change notifications. */
export interface WorkerLoadSource {
  peek(): LoadEvent[];
  onChange(listener: () => void): () => void;
}

/** One-shot timers; real ones by default, a fake clock in unit tests. */
export interface WatchTimers {
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

const realTimers: WatchTimers = {
  setTimer: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The parts of node's ServerHttp2Stream a watcher uses (fakes in unit tests). */
export interface WatchStream {
  respond(headers: OutgoingHttpHeaders, options: { waitForTrailers: boolean }): void;
  /** `done` runs once the chunk has left node's buffer (or the stream is gone). */
  write(chunk: Buffer, done: (error?: Error | null) => void): boolean;
  end(): unknown;
  sendTrailers(trailers: OutgoingHttpHeaders): void;
  on(event: 'close' | 'wantTrailers' | 'error', listener: () => void): unknown;
  readonly destroyed: boolean;
  readonly closed: boolean;
}

export interface WorkerLoadServiceOptions {
  readonly source: WorkerLoadSource;
  readonly heartbeatMs: number;
  readonly debounceMs?: number;
  readonly timers?: WatchTimers;
}

interface Watcher {
  readonly stream: WatchStream;
  /** Updates sent on this stream. */
  sequence: number;
  /** An update is still in node's buffer: the next one waits for it. */
  inFlight: boolean;
  /** An update was skipped while one was in flight: send the latest state when it is out. */
  pending: boolean;
  ended: boolean;
}

interface RankLoadMessage {
  [field: string]: number | string | boolean | string[] | undefined;
}

export class WorkerLoadService {
  /** updates: written to a stream; skipped: not written because that stream's last update was still unsent. */
  readonly stats = { updates: 0, skipped: 0, watches: 0 };
  private readonly watchers = new Set<Watcher>();
  private readonly updateType: MessageTypeDefinition<{ ranks: RankLoadMessage[] }, unknown>;
  private readonly requestType: MessageTypeDefinition<object, object>;
  private readonly timers: WatchTimers;
  private readonly debounceMs: number;
  private unsubscribe: (() => void) | undefined;
  private debounce: unknown;
  private heartbeat: unknown;
  private closed = false;

  constructor(private readonly options: WorkerLoadServiceOptions) {
    const definition = loadSync(join(PROTO_DIR, 'dynamo/sidecar/v1/worker_load.proto'), { keepCase: true });
    this.updateType = definition[`${PACKAGE}.WorkerLoadUpdate`] as MessageTypeDefinition<{ ranks: RankLoadMessage[] }, unknown>;
    this.requestType = definition[`${PACKAGE}.WatchLoadRequest`] as MessageTypeDefinition<object, object>;
    this.timers = options.timers ?? realTimers;
    this.debounceMs = options.debounceMs ?? LOAD_DEBOUNCE_MS;
  }

  /** Watch streams open right now. */
  get watcherCount(): number {
    return this.watchers.size;
  }

  /** Timers armed right now (debounce and heartbeat); 0 whenever no watcher is open. */
  get armedTimers(): number {
    return (this.debounce === undefined ? 0 : 1) + (this.heartbeat === undefined ? 0 : 1);
  }

  /** Every method of the service is ours: none is forwarded to the engine. */
  handles(path: string | undefined): boolean {
    return path !== undefined && path.startsWith(`/${WORKER_LOAD_SERVICE}/`);
  }

  serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => {});
    if (headers[':path'] !== WORKER_LOAD_WATCH_PATH) {
      respondTrailersOnly(stream, trailersOnlyHeaders(GrpcStatus.UNIMPLEMENTED, `${WORKER_LOAD_SERVICE} has no method ${String(headers[':path'])}`));
      return;
    }
    readSingleMessage(stream, MAX_REQUEST_BYTES).then(
      (message) => {
        try {
          this.requestType.deserialize(message);
        } catch (err) {
          respondTrailersOnly(stream, trailersOnlyHeaders(GrpcStatus.INVALID_ARGUMENT, `WatchLoadRequest: ${(err as Error).message}`));
          return;
        }
        this.watch(stream);
      },
      (err: Error) => respondTrailersOnly(stream, trailersOnlyHeaders(GrpcStatus.INVALID_ARGUMENT, `WatchLoadRequest: ${err.message}`)),
    );
  }

  /** Starts a watch on a stream whose request has been read. */
  watch(stream: WatchStream): void {
    if (stream.destroyed || stream.closed) return;
    if (this.closed) {
      stream.respond({ [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => sendTrailersQuietly(stream, GrpcStatus.UNAVAILABLE, SHUTDOWN_MESSAGE));
      stream.end();
      return;
    }
    const watcher: Watcher = { stream, sequence: 0, inFlight: false, pending: false, ended: false };
    stream.respond({ [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => sendTrailersQuietly(stream, GrpcStatus.UNAVAILABLE, SHUTDOWN_MESSAGE));
    stream.on('close', () => this.remove(watcher));
    this.watchers.add(watcher);
    this.stats.watches++;
    if (this.watchers.size === 1) {
      this.unsubscribe = this.options.source.onChange(() => this.scheduleDebounced());
      this.armHeartbeat();
    }
    this.send(watcher, this.options.source.peek());
  }

  /** Sends the current load to every watcher now (a rejection, the start of a drain). */
  publishNow(): void {
    this.clearDebounce();
    this.broadcast();
  }

  /** Ends every watch with UNAVAILABLE after what is already written; later watches get the same at once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopTimers();
    for (const watcher of this.watchers) {
      if (watcher.ended || watcher.stream.destroyed || watcher.stream.closed) continue;
      watcher.ended = true;
      try {
        watcher.stream.end(); // 'wantTrailers' follows once the buffered updates are out
      } catch {
        // a stream torn down under us: its 'close' removes the watcher
      }
    }
  }

  private remove(watcher: Watcher): void {
    if (!this.watchers.delete(watcher)) return;
    watcher.ended = true;
    if (this.watchers.size === 0) this.stopTimers();
  }

  private stopTimers(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.clearDebounce();
    if (this.heartbeat !== undefined) this.timers.clearTimer(this.heartbeat);
    this.heartbeat = undefined;
  }

  private clearDebounce(): void {
    if (this.debounce !== undefined) this.timers.clearTimer(this.debounce);
    this.debounce = undefined;
  }

  private scheduleDebounced(): void {
    if (this.debounce !== undefined || this.closed) return;
    this.debounce = this.timers.setTimer(() => {
      this.debounce = undefined;
      this.broadcast();
    }, this.debounceMs);
  }

  private armHeartbeat(): void {
    if (this.heartbeat !== undefined) this.timers.clearTimer(this.heartbeat);
    this.heartbeat = this.timers.setTimer(() => {
      this.heartbeat = undefined;
      this.broadcast();
    }, this.options.heartbeatMs);
  }

  /** One snapshot for every watcher; the heartbeat counts from here. */
  private broadcast(): void {
    if (this.watchers.size === 0 || this.closed) return;
    const ranks = this.options.source.peek();
    for (const watcher of this.watchers) this.send(watcher, ranks);
    this.armHeartbeat();
  }

  private send(watcher: Watcher, ranks: readonly LoadEvent[]): void {
    const stream = watcher.stream;
    if (watcher.ended || stream.destroyed || stream.closed) return;
    if (watcher.inFlight) {
      watcher.pending = true;
      this.stats.skipped++;
      return;
    }
    watcher.sequence++;
    const frame = frameMessage(this.updateType.serialize({ ranks: ranks.map((event) => rankLoad(event, watcher.sequence)) }));
    this.stats.updates++;
    watcher.inFlight = true;
    stream.write(frame, () => this.onWritten(watcher));
  }

  /** The last update left node's buffer: send the latest state if updates were skipped meanwhile. */
  private onWritten(watcher: Watcher): void {
    watcher.inFlight = false;
    if (!watcher.pending) return;
    watcher.pending = false;
    this.send(watcher, this.options.source.peek());
  }
}

/** A LoadEvent as a RankLoad message: null optionals left out, null model as "" (not known yet). */
function rankLoad(event: LoadEvent, sequence: number): RankLoadMessage {
  return {
    worker_id: event.worker_id,
    dp_rank: event.dp_rank,
    active_decode_blocks: event.active_decode_blocks,
    active_prefill_tokens: event.active_prefill_tokens,
    kv_used_blocks: event.kv_used_blocks ?? undefined,
    kv_total_blocks: event.kv_total_blocks ?? undefined,
    max_num_batched_tokens: event.max_num_batched_tokens ?? undefined,
    engine_request: event.engine_request,
    request_queue: event.request_queue,
    engine_request_limit: event.engine_request_limit ?? undefined,
    overloaded: event.overloaded,
    draining: event.draining,
    timestamp_ms: event.timestamp_ms,
    sequence,
    model: event.model ?? '',
    grpc_address: event.grpc_address,
    heartbeat_ms: event.heartbeat_ms,
    predicted_ttft_ms: event.predicted_ttft_ms ?? undefined,
    overloaded_priority: event.overloaded_priority ?? undefined,
    overloaded_tenants: event.overloaded_tenants ?? [],
    prefill_tokens_ahead: event.prefill_tokens_ahead ?? undefined,
    ttft_base_ms: event.ttft_base_ms ?? undefined,
    prefill_tokens_per_s: event.prefill_tokens_per_s ?? undefined,
    kv_free_blocks: event.kv_free_blocks ?? undefined,
    kv_block_size: event.kv_block_size ?? undefined,
    admit_now: event.admit_now ?? undefined,
    request_queue_limit: event.request_queue_limit ?? undefined,
  };
}

function sendTrailersQuietly(stream: WatchStream, status: GrpcStatus, message: string): void {
  try {
    stream.sendTrailers(statusTrailers(status, message));
  } catch {
    // the client went away between the last DATA frame and the trailers
  }
}
