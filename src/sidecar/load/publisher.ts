/**
 * Publishes the tracker's load events to NATS, one message per dp rank: as JSON (format `json`,
 * the default: our event with every field), or as NVIDIA Dynamo's event plane carries them
 * (format `dynamo`: a MessagePack EventEnvelope around ActiveLoad, src/protocol/dynamo-event.ts,
 * with this publisher's random publisher_id and a sequence counting the envelopes handed to
 * nats.js, from 0).
 *
 *   const p = new LoadPublisher({ servers: 'nats://127.0.0.1:4222', subject: loadSubject(ns, comp, ep), source: tracker, logger });
 *   p.start();  ...  p.publishNow();  // on a rejection  ...  await p.close();
 *
 * When: on change (debounced `debounceMs`, default 5: a burst of changes becomes one publish),
 * on a heartbeat (`heartbeatMs`, default 1000, counted from the last publish, so an idle worker
 * keeps publishing and a stale "busy" never sticks), and at once on publishNow().
 *
 * Never blocks or throws into the proxy: publish is synchronous fire-and-forget. nats.js 3.x
 * buffers publishes without limit while disconnected, so while not connected we do not call
 * publish at all; the tracker holds the state and the first thing after (re)connecting is a
 * publish of the current snapshot.
 *
 * Liveness and counting (a broker can hang with its TCP connection open, e.g. SIGSTOP: nats.js
 * then reports nothing for minutes and every publish vanishes into the socket buffer):
 * - Handing an event to nats.js makes it *unconfirmed*. After each publish a confirmation probe,
 *   `flush()` (a PING after everything sent so far), runs; one probe at a time, covering every
 *   event handed over before it started. The server's PONG moves those events to
 *   `stats.published`. Events handed over while a probe runs wait for the next probe.
 * - A probe not answered within `livenessTimeoutMs` (default 2000) counts its events in
 *   `stats.failures` (they may still arrive late, but as stale load) and puts the publisher in
 *   state `stalled`: `connected` is false (the dynamo_sidecar_nats_connected gauge reads 0),
 *   nothing more is handed to the socket, and skipped publishes count as failures. It leaves
 *   `stalled` when the late PONG arrives (connected again, current snapshot published at once)
 *   or through nats.js's own disconnect and reconnect: nats.js PINGs the server every
 *   `livenessTimeoutMs` and drops the connection after two unanswered PINGs.
 * - With the default heartbeat of 1 s a hung broker reads disconnected within about
 *   heartbeat + livenessTimeoutMs (3 s), and at most one probe's events are miscounted as
 *   delivered: none, since they are counted only on the PONG.
 * - `stats.failures` also counts publishes skipped while not connected and publishes that threw;
 *   `sequence` only advances for events actually handed over.
 *
 * Connecting: the first connect is our own retry loop (exponential backoff to
 * `reconnectTimeWaitMs`, plus jitter) in the background (src/platform/nats-first-connect.ts), so a broker that is down at startup
 * neither blocks nor crashes startup, and close() can stop it (nats.js's waitOnFirstConnect
 * loop cannot be cancelled). After that nats.js reconnects forever (maxReconnectAttempts -1).
 * Status changes are logged once per state change, never per attempt; server URLs are logged
 * through the logger, which redacts credentials.
 */
import { createHash } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectInBackground, type FirstConnect, type NatsConnectFn } from '../../platform/nats-first-connect.js';
import type { NatsSecurity } from '../../platform/nats-security.js';
import { DEFAULT_EVENT_FORMAT, DEFAULT_LOAD_HEARTBEAT_MS, DEFAULT_NATS_LIVENESS_TIMEOUT_MS, LOAD_DEBOUNCE_MS } from '../config/sidecar-config.js';
import type { Logger } from '../../platform/log.js';
import type { LoadEvent } from '../../protocol/load-event.js';
import { DYNAMO_LOAD_TOPIC, activeLoadOf, encodeDynamoEnvelope, randomPublisherId, type EventFormat } from '../../protocol/dynamo-event.js';

/** What the publisher needs from the tracker. */
export interface LoadSource {
  snapshot(): LoadEvent[];
  onChange(listener: () => void): () => void;
}

/** `stalled`: the TCP connection is up but the server did not confirm publishes in time. */
export type NatsState = 'idle' | 'connecting' | 'connected' | 'stalled' | 'disconnected' | 'reconnecting' | 'closed';

export interface LoadPublisherOptions {
  servers: string | string[];
  subject: string;
  source: LoadSource;
  logger: Logger;
  /** How each event is written; default DEFAULT_EVENT_FORMAT (json). */
  format?: EventFormat;
  /** Default LOAD_DEBOUNCE_MS. */
  debounceMs?: number;
  /** Publish at least this often; default DEFAULT_LOAD_HEARTBEAT_MS. */
  heartbeatMs?: number;
  reconnectTimeWaitMs?: number;
  reconnectJitterMs?: number;
  /** Publishes unconfirmed (and PINGs unanswered) this long mean the broker is not there. */
  livenessTimeoutMs?: number;
  /** Client name shown by the server's monitoring. */
  name?: string;
  /** TLS files and authentication of the connection (nats-security.ts). */
  security?: NatsSecurity;
  /** Replaceable for tests (e.g. to observe publish calls). */
  connect?: NatsConnectFn;
}

/** Stable id for this worker: first 53 bits of sha256("host:port"), a safe JSON integer. */
export function defaultWorkerId(hostname: string, listenPort: number): number {
  const digest = createHash('sha256').update(`${hostname}:${listenPort}`).digest();
  return Number(digest.readBigUInt64BE(0) >> 11n);
}

export class LoadPublisher {
  /** published: confirmed by the server; failures: skipped, threw, or not confirmed in time. */
  readonly stats = { published: 0, failures: 0, connects: 0, disconnects: 0 };
  private readonly options: LoadPublisherOptions;
  private nc: NatsConnection | undefined;
  private stateValue: NatsState = 'idle';
  private closing = false;
  private unsubscribe: (() => void) | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private firstConnect: FirstConnect | undefined;
  private readonly livenessTimeoutMs: number;
  /** Events handed to nats.js and not yet covered by a probe. */
  private unconfirmed = 0;
  /** The running confirmation probe's deadline, if one runs. */
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  /** Size of the running probe's batch. */
  private probeBatch = 0;
  /** Format dynamo: the envelope's publisher_id, and the sequence of the next envelope. */
  private readonly dynamo: { readonly publisherId: number; sequence: number } | undefined;

  constructor(options: LoadPublisherOptions) {
    this.options = options;
    this.livenessTimeoutMs = options.livenessTimeoutMs ?? DEFAULT_NATS_LIVENESS_TIMEOUT_MS;
    if ((options.format ?? DEFAULT_EVENT_FORMAT) === 'dynamo') this.dynamo = { publisherId: randomPublisherId(), sequence: 0 };
  }

  /** The envelopes' publisher_id with format dynamo; undefined with json. */
  get publisherId(): number | undefined {
    return this.dynamo?.publisherId;
  }

  /** Events handed to nats.js whose confirmation is still outstanding. */
  get pending(): number {
    return this.unconfirmed + this.probeBatch;
  }

  get state(): NatsState {
    return this.stateValue;
  }

  get connected(): boolean {
    return this.stateValue === 'connected';
  }

  start(): void {
    if (this.stateValue !== 'idle') return;
    this.unsubscribe = this.options.source.onChange(() => this.scheduleDebounced());
    this.heartbeat = setTimeout(() => this.publishNow(), this.options.heartbeatMs ?? DEFAULT_LOAD_HEARTBEAT_MS);
    this.heartbeat.unref();
    void this.connectLoop();
  }

  /** Publishes the current snapshot now (cancelling a pending debounced publish). */
  publishNow(): void {
    clearTimeout(this.debounce);
    this.debounce = undefined;
    if (this.closing) return;
    this.heartbeat?.refresh();
    const nc = this.nc;
    if (!nc || this.stateValue !== 'connected') {
      this.stats.failures += 1;
      return;
    }
    for (const event of this.options.source.snapshot()) {
      try {
        nc.publish(this.options.subject, this.encode(event));
        if (this.dynamo) this.dynamo.sequence++;
        this.unconfirmed++;
      } catch {
        this.stats.failures++;
      }
    }
    this.probe(nc);
  }

  private encode(event: LoadEvent): string | Uint8Array {
    if (!this.dynamo) return JSON.stringify(event);
    const header = { publisherId: this.dynamo.publisherId, sequence: this.dynamo.sequence, publishedAtMs: Date.now(), topic: DYNAMO_LOAD_TOPIC };
    return encodeDynamoEnvelope(header, activeLoadOf(event));
  }

  /**
   * Confirms everything handed over so far with one flush (PING/PONG), bounded by the liveness
   * timeout. Exactly one of the success, failure and timeout paths counts the batch.
   */
  private probe(nc: NatsConnection): void {
    if (this.probing || this.unconfirmed === 0) return;
    const batch = this.unconfirmed;
    this.unconfirmed = 0;
    this.probing = true;
    this.probeBatch = batch;
    let counted = false;
    const settle = (confirmed: boolean): boolean => {
      if (counted) return false;
      counted = true;
      clearTimeout(this.probeTimer);
      this.probeTimer = undefined;
      this.probing = false;
      this.probeBatch = 0;
      if (confirmed) this.stats.published += batch;
      else this.stats.failures += batch;
      return true;
    };
    this.probeTimer = setTimeout(() => {
      if (!settle(false) || this.closing || this.nc !== nc) return;
      this.giveUpUnconfirmed();
      if (this.stateValue === 'connected') this.setState('stalled', { timeout_ms: this.livenessTimeoutMs });
    }, this.livenessTimeoutMs);
    this.probeTimer.unref();
    let flushed: Promise<void>;
    try {
      flushed = nc.flush();
    } catch (err) {
      flushed = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    flushed.then(
      () => {
        if (settle(true)) {
          if (this.stateValue === 'connected' && this.nc === nc) this.probe(nc);
          return;
        }
        // A late answer from a stalled server: it is back.
        if (!this.closing && this.nc === nc && this.stateValue === 'stalled') {
          this.setState('connected', { server: nc.getServer() });
          this.publishNow();
        }
      },
      () => void settle(false),
    );
  }

  /** Events handed over but not yet probed, on a stalled or lost connection: count them as failed. */
  private giveUpUnconfirmed(): void {
    this.stats.failures += this.unconfirmed;
    this.unconfirmed = 0;
  }

  /** Stops publishing, flushes what the client holds when connected, and closes. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.unsubscribe?.();
    clearTimeout(this.debounce);
    clearTimeout(this.heartbeat);
    clearTimeout(this.probeTimer);
    this.firstConnect?.cancel();
    const nc = this.nc;
    if (nc && !nc.isClosed()) {
      if (this.stateValue === 'connected') await withTimeout(nc.drain(), 2000).catch(() => undefined);
      if (!nc.isClosed()) await nc.close().catch(() => undefined);
    }
    this.setState('closed');
  }

  private scheduleDebounced(): void {
    if (this.debounce !== undefined || this.closing) return;
    this.debounce = setTimeout(() => this.publishNow(), this.options.debounceMs ?? LOAD_DEBOUNCE_MS);
    this.debounce.unref();
  }

  private async connectLoop(): Promise<void> {
    this.setState('connecting');
    this.firstConnect = connectInBackground({
      connect: this.options.connect,
      servers: this.options.servers,
      name: this.options.name ?? 'dynamo-sidecar',
      reconnectTimeWaitMs: this.options.reconnectTimeWaitMs ?? 1000,
      reconnectJitterMs: this.options.reconnectJitterMs ?? 500,
      pingIntervalMs: this.livenessTimeoutMs,
      logger: this.options.logger,
      security: this.options.security,
    });
    const nc = await this.firstConnect.connected;
    if (nc && !this.closing) this.attach(nc);
  }

  private attach(nc: NatsConnection): void {
    this.nc = nc;
    this.stats.connects++;
    this.setState('connected', { server: nc.getServer() });
    this.publishNow();
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') {
          this.stats.disconnects++;
          this.giveUpUnconfirmed();
          this.setState('disconnected', { server: s.server });
        } else if (s.type === 'reconnecting') {
          this.setState('reconnecting');
        } else if (s.type === 'reconnect') {
          this.stats.connects++;
          this.setState('connected', { server: s.server });
          this.publishNow();
        }
      }
    })();
    void nc.closed().then(() => {
      if (this.closing || this.nc !== nc) return;
      // Closed for good without close() (e.g. repeated auth errors): start over.
      this.nc = undefined;
      this.setState('disconnected');
      void this.connectLoop();
    });
  }

  private setState(state: NatsState, fields: Record<string, unknown> = {}): void {
    if (this.stateValue === state) return;
    const previous = this.stateValue;
    this.stateValue = state;
    const log = this.options.logger;
    if (state === 'connected')
      log.info(previous === 'connecting' ? 'NATS connected' : previous === 'stalled' ? 'NATS answering again' : 'NATS reconnected', {
        subject: this.options.subject,
        ...fields,
      });
    else if (state === 'disconnected') log.warn('NATS disconnected; load events paused until reconnection', fields);
    else if (state === 'stalled') log.warn('NATS not confirming publishes; load events paused until it answers', fields);
    else if (state === 'reconnecting' || state === 'connecting') log.debug(`NATS ${state}`, fields);
    else if (state === 'closed') log.info('NATS publisher closed', { published: this.stats.published });
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
