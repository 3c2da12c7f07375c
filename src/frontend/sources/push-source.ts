/**
 * The broker-less load source: for each --worker address, a WorkerLoad.Watch stream to the
 * sidecar there (proto/dynamo/sidecar/v1/worker_load.proto). The sidecar pushes its ranks at
 * once, on every change and at least every heartbeat; each update goes through the same
 * parseRankReport as a NATS event, with the --worker address as the routing address.
 *
 * A stream that ends or fails (sidecar restarting, unreachable) makes the worker unroutable
 * until a new stream delivers an update; reconnection backs off from 100 ms to 2 s. A stream
 * that stays open but goes silent for 3 heartbeats is cancelled and reopened (a hung sidecar
 * must not look alive because its TCP connection is); silence is measured so that a stall of
 * this process's own event loop is not taken for it (silence-timer.ts).
 *
 * A worker has at most MAX_DP_RANKS ranks: an update's ranks past that many are skipped undecoded
 * (watch-update.ts), and the pool refuses a rank beyond them spread over updates; both are counted
 * (stats.ranksRefused) and warned about once per --worker address.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { join } from 'node:path';
import type { Logger } from '../../platform/log.js';
import { MAX_DP_RANKS } from '../../protocol/load-event.js';
import { PROTO_DIR } from '../../protocol/proto-path.js';
import type { WorkerCredentials } from '../generate/worker-credentials.js';
import { parseRankReport } from '../routing/load-report.js';
import { STALE_AFTER_HEARTBEATS, type WorkerPool } from '../routing/worker-pool.js';
import { SilenceTimer } from './silence-timer.js';
import { boundedUpdateDecoder, type WatchUpdate } from './watch-update.js';

interface WatchClient extends grpc.Client {
  Watch(request: object, options?: grpc.CallOptions): grpc.ClientReadableStream<WatchUpdate>;
}

let clientCtor: grpc.ServiceClientConstructor | undefined;

/**
 * Client constructor of dynamo.sidecar.v1.WorkerLoad (loaded once; u64 fields arrive as decimal
 * strings, unset proto3 optionals stay absent; an update decodes to a WatchUpdate, at most
 * MAX_DP_RANKS ranks). Its `service` also serves as a sidecar's in tests (the encoding is the proto's).
 */
export function workerLoadClientCtor(): grpc.ServiceClientConstructor {
  if (!clientCtor) {
    const definition = protoLoader.loadSync(join(PROTO_DIR, 'dynamo/sidecar/v1/worker_load.proto'), {
      keepCase: true,
      longs: String,
      defaults: true,
      oneofs: true,
    });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { dynamo: { sidecar: { v1: { WorkerLoad: grpc.ServiceClientConstructor } } } };
    const watch = pkg.dynamo.sidecar.v1.WorkerLoad.service['Watch']!;
    clientCtor = grpc.makeGenericClientConstructor(
      { Watch: { ...watch, responseDeserialize: boundedUpdateDecoder(watch.responseDeserialize as (bytes: Buffer) => { ranks?: unknown[] }) } },
      'WorkerLoad',
    );
  }
  return clientCtor;
}

export interface PushLoadSourceOptions {
  readonly addresses: readonly string[];
  readonly pool: WorkerPool;
  readonly now: () => number;
  readonly logger: Logger;
  /** Heartbeat assumed before the first update says the sidecar's own. */
  readonly defaultHeartbeatMs: number;
  readonly onApplied?: () => void;
  /** Plaintext or TLS (--worker-tls); default plaintext. */
  readonly credentials?: WorkerCredentials | undefined;
}

/** One --worker address and its stream. */
class WorkerWatch {
  private client: WatchClient;
  private clientGeneration: number;
  private call: grpc.ClientReadableStream<WatchUpdate> | undefined;
  private workerIds = new Set<string>();
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly silence: SilenceTimer;
  private failures = 0;
  private closed = false;
  private heartbeatMs: number;
  /** Logged once per outage, not per attempt. */
  private reportedDown = false;
  /** Ranks beyond MAX_DP_RANKS are logged once per address (one sidecar, one worker), not per update. */
  private warnedRanks = false;

  constructor(
    readonly address: string,
    private readonly options: PushLoadSourceOptions,
    private readonly stats: PushLoadSource['stats'],
  ) {
    this.clientGeneration = options.credentials?.generation ?? 0;
    this.client = this.newClient();
    this.heartbeatMs = options.defaultHeartbeatMs;
    this.silence = new SilenceTimer(() => {
      const call = this.call;
      if (!call) return;
      this.lost(call, `no update for ${STALE_AFTER_HEARTBEATS} heartbeats`);
      call.cancel();
    });
  }

  private newClient(): WatchClient {
    const Ctor = workerLoadClientCtor();
    const channel = this.options.credentials?.channel() ?? { credentials: grpc.credentials.createInsecure(), options: {} };
    return new Ctor(this.address, channel.credentials, {
      ...channel.options,
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2000,
    }) as unknown as WatchClient;
  }

  get connected(): boolean {
    return [...this.workerIds].some((id) => this.options.pool.get(id)?.connected === true);
  }

  open(): void {
    if (this.closed) return;
    // TLS files reloaded since the client was made: the new stream goes over a new client with the new files.
    const generation = this.options.credentials?.generation ?? 0;
    if (generation !== this.clientGeneration) {
      this.client.close();
      this.client = this.newClient();
      this.clientGeneration = generation;
    }
    const call = this.client.Watch({});
    this.call = call;
    this.armSilence();
    call.on('data', (update: WatchUpdate) => {
      if (this.call !== call) return;
      this.failures = 0;
      this.armSilence();
      const now = this.options.now();
      const reported = new Set<string>();
      for (const raw of update.ranks) {
        let report;
        try {
          report = parseRankReport(raw);
        } catch (err) {
          this.stats.invalid++;
          this.options.logger.warn('ignoring a malformed load update', { address: this.address, reason: (err as Error).message });
          continue;
        }
        const known = this.options.pool.get(report.workerId) !== undefined;
        const worker = this.options.pool.apply(report, now, 'push', this.address);
        if (worker === undefined && known) {
          // A rank beyond the worker's MAX_DP_RANKS: the address still reports that worker.
          this.stats.ranksRefused++;
          reported.add(report.workerId);
          this.warnRanks({ worker_id: report.workerId });
          continue;
        }
        if (worker === undefined) {
          this.stats.refused++;
          continue;
        }
        this.stats.events++;
        this.heartbeatMs = worker.heartbeatMs;
        this.workerIds.add(worker.workerId);
        reported.add(worker.workerId);
        if (!known || this.reportedDown) {
          this.options.logger.info(known ? 'worker reachable again' : 'worker appeared', {
            worker_id: worker.workerId,
            model: worker.model,
            address: this.address,
            source: 'push',
          });
          this.reportedDown = false;
        }
      }
      if (update.ranksSkipped > 0) {
        this.stats.ranksRefused += update.ranksSkipped;
        this.warnRanks({ ranks_in_update: update.ranks.length + update.ranksSkipped });
      }
      this.forgetReplaced(reported);
      this.options.onApplied?.();
    });
    call.on('error', (err: grpc.ServiceError) => this.lost(call, `${grpc.status[err.code] ?? err.code}: ${err.details}`));
    call.on('end', () => this.lost(call, 'stream ended'));
  }

  /**
   * Every update is a snapshot of all the sidecar's ranks: an id this address reported before
   * but not now is gone (the sidecar restarted under a new worker_id, e.g. a recreated
   * container's new hostname). Kept, it would stay routable with stale (free) load for ever.
   */
  private forgetReplaced(reported: ReadonlySet<string>): void {
    if (reported.size === 0) return;
    for (const id of this.workerIds) {
      if (reported.has(id)) continue;
      this.workerIds.delete(id);
      this.options.pool.forget(id);
      this.options.logger.info('worker replaced: its address reports another worker_id now', {
        worker_id: id,
        address: this.address,
        now_reported: [...reported],
      });
    }
  }

  private warnRanks(fields: Record<string, unknown>): void {
    if (this.warnedRanks) return;
    this.warnedRanks = true;
    this.options.logger.warn('ignoring dp ranks: more ranks than a worker may have', {
      address: this.address,
      source: 'push',
      max_ranks: MAX_DP_RANKS,
      ...fields,
    });
  }

  /** Silence is judged on the loop's own time (silence-timer.ts): a stall of this process is not the sidecar's silence. */
  private armSilence(): void {
    this.silence.arm(STALE_AFTER_HEARTBEATS * this.heartbeatMs, this.heartbeatMs);
  }

  private lost(call: grpc.ClientReadableStream<unknown>, reason: string): void {
    if (this.call !== call || this.closed) return;
    this.call = undefined;
    this.silence.disarm();
    for (const id of this.workerIds) this.options.pool.disconnected(id);
    if (!this.reportedDown) {
      this.reportedDown = true;
      this.options.logger.warn('worker load stream lost: worker not routable until it is back', { address: this.address, reason });
    }
    this.options.onApplied?.();
    const delay = Math.min(2000, 100 * 2 ** this.failures++);
    this.retryTimer = setTimeout(() => this.open(), delay);
    this.retryTimer.unref();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.silence.disarm();
    const call = this.call;
    this.call = undefined;
    call?.cancel();
    this.client.close();
  }
}

export class PushLoadSource {
  readonly source = 'push' as const;
  readonly stats = { events: 0, invalid: 0, refused: 0, ranksRefused: 0 };
  private readonly watches: WorkerWatch[];

  constructor(options: PushLoadSourceOptions) {
    this.watches = options.addresses.map((address) => new WorkerWatch(address, options, this.stats));
  }

  start(): void {
    for (const watch of this.watches) watch.open();
  }

  get connected(): boolean {
    return this.watches.some((w) => w.connected);
  }

  close(): void {
    for (const watch of this.watches) watch.close();
  }
}
