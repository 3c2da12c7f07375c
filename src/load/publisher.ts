/**
 * Publishes the tracker's load events to NATS as JSON, one message per dp rank.
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
 * publish of the current snapshot. Events not handed over (disconnected or publish threw)
 * count in `stats.failures`; `sequence` only advances for events actually published.
 *
 * Connecting: the first connect is our own retry loop (exponential backoff to
 * `reconnectTimeWaitMs`, plus jitter) in the background, so a broker that is down at startup
 * neither blocks nor crashes startup, and close() can stop it (nats.js's waitOnFirstConnect
 * loop cannot be cancelled). After that nats.js reconnects forever (maxReconnectAttempts -1).
 * Status changes are logged once per state change, never per attempt.
 */
import { createHash } from 'node:crypto';
import { connect as natsConnect, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import type { LoadEvent } from './load-tracker.js';

/** What the publisher needs from the tracker. */
export interface LoadSource {
  snapshot(): LoadEvent[];
  onChange(listener: () => void): () => void;
}

export type ConnectFn = (options: NodeConnectionOptions) => Promise<NatsConnection>;
export type NatsState = 'idle' | 'connecting' | 'connected' | 'disconnected' | 'reconnecting' | 'closed';

export interface LoadPublisherOptions {
  servers: string | string[];
  subject: string;
  source: LoadSource;
  logger: Logger;
  debounceMs?: number;
  heartbeatMs?: number;
  reconnectTimeWaitMs?: number;
  reconnectJitterMs?: number;
  /** Client name shown by the server's monitoring. */
  name?: string;
  /** Replaceable for tests (e.g. to observe publish calls). */
  connect?: ConnectFn;
}

export class InvalidSubjectNameError extends Error {
  override readonly name = 'InvalidSubjectNameError';
}

/**
 * Escapes one subject token: [A-Za-z0-9_-] stay, every other character becomes %XX per UTF-8
 * byte (so '.', '*', '>', whitespace and '%' itself). Injective, so two different names can
 * never share a subject, and usual names (`dynamo`, `backend`, `generate`) are unchanged.
 */
export function escapeSubjectToken(name: string): string {
  if (name === '') throw new InvalidSubjectNameError('subject name segment must not be empty');
  return name.replace(/[^A-Za-z0-9_-]/gu, (ch) => [...Buffer.from(ch, 'utf8')].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join(''));
}

export function loadSubject(namespace: string, component: string, endpoint: string): string {
  return `namespace.${escapeSubjectToken(namespace)}.component.${escapeSubjectToken(component)}.endpoint.${escapeSubjectToken(endpoint)}.kv_metrics`;
}

/** Stable id for this worker: first 53 bits of sha256("host:port"), a safe JSON integer. */
export function defaultWorkerId(hostname: string, listenPort: number): number {
  const digest = createHash('sha256').update(`${hostname}:${listenPort}`).digest();
  return Number(digest.readBigUInt64BE(0) >> 11n);
}

export class LoadPublisher {
  readonly stats = { published: 0, failures: 0, connects: 0, disconnects: 0 };
  private readonly options: LoadPublisherOptions;
  private readonly connectFn: ConnectFn;
  private nc: NatsConnection | undefined;
  private stateValue: NatsState = 'idle';
  private closing = false;
  private unsubscribe: (() => void) | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;

  constructor(options: LoadPublisherOptions) {
    this.options = options;
    this.connectFn = options.connect ?? natsConnect;
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
    this.heartbeat = setTimeout(() => this.publishNow(), this.options.heartbeatMs ?? 1000);
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
        nc.publish(this.options.subject, JSON.stringify(event));
        this.stats.published++;
      } catch {
        this.stats.failures++;
      }
    }
  }

  /** Stops publishing, flushes what the client holds when connected, and closes. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.unsubscribe?.();
    clearTimeout(this.debounce);
    clearTimeout(this.heartbeat);
    this.wake?.();
    const nc = this.nc;
    if (nc && !nc.isClosed()) {
      if (this.stateValue === 'connected') await withTimeout(nc.drain(), 2000).catch(() => undefined);
      if (!nc.isClosed()) await nc.close().catch(() => undefined);
    }
    this.setState('closed');
  }

  private scheduleDebounced(): void {
    if (this.debounce !== undefined || this.closing) return;
    this.debounce = setTimeout(() => this.publishNow(), this.options.debounceMs ?? 5);
    this.debounce.unref();
  }

  private async connectLoop(): Promise<void> {
    const cap = this.options.reconnectTimeWaitMs ?? 1000;
    const jitter = this.options.reconnectJitterMs ?? 500;
    this.setState('connecting');
    for (let attempt = 0; !this.closing; attempt++) {
      try {
        const nc = await this.connectFn({
          servers: this.options.servers,
          name: this.options.name ?? 'dynamo-sidecar',
          maxReconnectAttempts: -1,
          reconnectTimeWait: cap,
          reconnectJitter: jitter,
          waitOnFirstConnect: false,
          timeout: 5000,
        });
        if (this.closing) {
          await nc.close();
          return;
        }
        this.attach(nc);
        return;
      } catch (err) {
        if (attempt === 0) this.options.logger.warn('NATS not reachable, retrying in the background', { servers: this.options.servers, error: (err as Error).message });
        await this.sleep(Math.min(cap, 100 * 2 ** attempt) + Math.random() * jitter);
      }
    }
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
    if (state === 'connected') log.info(previous === 'connecting' ? 'NATS connected' : 'NATS reconnected', { subject: this.options.subject, ...fields });
    else if (state === 'disconnected') log.warn('NATS disconnected; load events paused until reconnection', fields);
    else if (state === 'reconnecting' || state === 'connecting') log.debug(`NATS ${state}`, fields);
    else if (state === 'closed') log.info('NATS publisher closed', { published: this.stats.published });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
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
