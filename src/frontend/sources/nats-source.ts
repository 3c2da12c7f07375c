/**
 * Reads the sidecars' load events from NATS (one JSON event per rank, on
 * namespace.{ns}.component.{component}.endpoint.{endpoint}.kv_metrics, the subject and escaping
 * the sidecar publishes with) into the worker pool.
 *
 * A broker that is down at startup does not block startup: the first connect retries in the
 * background, and after that nats.js reconnects forever and re-subscribes by itself. While
 * disconnected the pool is told the source is down: load from NATS workers counts as unknown
 * (free) and no worker is forgotten, so routing goes on, protected by the sidecars' own caps.
 * A malformed event, or one naming a new worker beyond --max-workers, is counted and logged
 * (the first, then one in 1000), never applied; one naming a rank beyond its worker's
 * MAX_DP_RANKS is counted (stats.ranksRefused) and logged once per worker.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../../platform/log.js';
import { connectInBackground, type FirstConnect, type NatsConnectFn } from '../../platform/nats-first-connect.js';
import type { NatsSecurity } from '../../platform/nats-security.js';
import { loadSubject, MAX_DP_RANKS } from '../../protocol/load-event.js';
import { InvalidLoadReportError, parseRankReport } from '../routing/load-report.js';
import type { WorkerPool } from '../routing/worker-pool.js';

export interface NatsLoadSourceOptions {
  readonly servers: readonly string[];
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
  readonly pool: WorkerPool;
  readonly now: () => number;
  readonly logger: Logger;
  /** Called after each applied event (e.g. to refresh gauges). */
  readonly onApplied?: () => void;
  readonly connect?: NatsConnectFn;
  /** TLS files and authentication of the connection (nats-security.ts). */
  readonly security?: NatsSecurity | undefined;
}

export class NatsLoadSource {
  readonly source = 'nats' as const;
  readonly subject: string;
  readonly stats = { events: 0, invalid: 0, refused: 0, ranksRefused: 0, connects: 0, disconnects: 0 };
  private nc: NatsConnection | undefined;
  private closing = false;
  private firstConnect: FirstConnect | undefined;
  private connectedValue = false;

  constructor(private readonly options: NatsLoadSourceOptions) {
    this.subject = loadSubject(options.namespace, options.component, options.endpoint);
  }

  get connected(): boolean {
    return this.connectedValue;
  }

  start(): void {
    // Down until the first connect: NATS workers (none yet) are not judged on old news.
    this.options.pool.setSourceUp('nats', false, this.options.now());
    void this.connectLoop();
  }

  async close(): Promise<void> {
    this.closing = true;
    this.firstConnect?.cancel();
    const nc = this.nc;
    this.nc = undefined;
    if (nc && !nc.isClosed()) await nc.close().catch(() => undefined);
  }

  /** Applies one raw message; exposed for tests. */
  handle(data: Uint8Array): void {
    let report;
    try {
      report = parseRankReport(JSON.parse(Buffer.from(data).toString('utf8')));
    } catch (err) {
      this.stats.invalid++;
      if (this.stats.invalid % 1000 === 1) {
        const reason = err instanceof InvalidLoadReportError || err instanceof SyntaxError ? err.message : String(err);
        this.options.logger.warn('ignoring a malformed load event', { subject: this.subject, reason, invalid_so_far: this.stats.invalid });
      }
      return;
    }
    const known = this.options.pool.get(report.workerId) !== undefined;
    const worker = this.options.pool.apply(report, this.options.now(), 'nats');
    const capped = worker === undefined && known ? this.options.pool.get(report.workerId) : undefined;
    if (capped) {
      this.stats.ranksRefused++;
      if (capped.ranksRefused === 1)
        this.options.logger.warn('ignoring dp ranks: more ranks than a worker may have', {
          worker_id: capped.workerId,
          source: 'nats',
          max_ranks: MAX_DP_RANKS,
        });
      return;
    }
    if (worker === undefined) {
      this.stats.refused++;
      if (this.stats.refused % 1000 === 1)
        this.options.logger.warn('ignoring a load event: the worker limit is reached', { worker_id: report.workerId, refused_so_far: this.stats.refused });
      return;
    }
    this.stats.events++;
    if (!known) this.options.logger.info('worker appeared', { worker_id: worker.workerId, model: worker.model, address: worker.address, source: 'nats' });
    this.options.onApplied?.();
  }

  private setConnected(connected: boolean, fields: Record<string, unknown> = {}): void {
    if (this.connectedValue === connected) return;
    this.connectedValue = connected;
    this.options.pool.setSourceUp('nats', connected, this.options.now());
    if (connected) {
      this.stats.connects++;
      this.options.logger.info('NATS connected: reading load events', { subject: this.subject, ...fields });
    } else {
      this.stats.disconnects++;
      this.options.logger.warn('NATS disconnected: worker load unknown (treated as free) until reconnection', fields);
    }
  }

  private async connectLoop(): Promise<void> {
    this.firstConnect = connectInBackground({
      connect: this.options.connect,
      servers: [...this.options.servers],
      name: 'dynamo-sidecar-frontend',
      reconnectTimeWaitMs: 1000,
      reconnectJitterMs: 500,
      pingIntervalMs: 2000,
      logger: this.options.logger,
      security: this.options.security,
    });
    const nc = await this.firstConnect.connected;
    if (nc && !this.closing) this.attach(nc);
  }

  private attach(nc: NatsConnection): void {
    this.nc = nc;
    nc.subscribe(this.subject, { callback: (err, msg) => (err ? undefined : this.handle(msg.data)) });
    this.setConnected(true, { server: nc.getServer() });
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') this.setConnected(false, { server: s.server });
        else if (s.type === 'reconnect') this.setConnected(true, { server: s.server });
      }
    })();
    void nc.closed().then(() => {
      if (this.closing || this.nc !== nc) return;
      this.nc = undefined;
      this.setConnected(false);
      void this.connectLoop();
    });
  }
}
