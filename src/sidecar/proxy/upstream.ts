/**
 * UpstreamPool: the engine connections, K of them (--upstream-connections), each an
 * UpstreamSession that keeps itself up (liveness by health check and keepalive PING, reconnect
 * with backoff, GOAWAY, TLS renewal). HTTP/2 multiplexes, so one connection can carry every call. Several limit what one
 * broken connection costs: it fails only the calls already on it, while the others carry the new
 * ones. They were measured for latency too (docs/data-plane.md): no gain the benchmark could
 * resolve, and more CPU per call, hence K = 1 by default.
 *
 * A new call goes to a connection that takes calls (SETTINGS came, probes answered in time, not
 * closing after GOAWAY), the one with the fewest open streams, ties in turn. When none does (all
 * connecting, or late with their probes while the pool is not yet down) it goes where a pool of one
 * would send it: a connection being opened, else a new one, so it waits or fails exactly as with
 * K = 1.
 *
 * Reachability of the pool: reachable while any connection is reachable, down (new calls
 * refused at once) only when every one is unreachable. The pool logs its own first outcome and
 * every change ("upstream reachable" / "upstream unreachable") and tells its listeners only of
 * changes of `reachable`; with K > 1 each connection's own changes are logged too, with its index.
 * Admission sits above the pool: K changes where admitted calls go, never how many.
 */
import type { ClientHttp2Session, ClientHttp2Stream, OutgoingHttpHeaders } from 'node:http2';
import type { HostPort } from '../../platform/config/host-port.js';
import type { ClientTls } from '../../platform/tls/client-tls.js';
import { formatHostPort } from '../../platform/config/host-port.js';
import {
  DEFAULT_UPSTREAM_CONNECTIONS,
  DEFAULT_UPSTREAM_KEEPALIVE_INTERVAL_MS,
  DEFAULT_UPSTREAM_PING_INTERVAL_MS,
  DEFAULT_UPSTREAM_PING_TIMEOUT_MS,
} from '../config/sidecar-config.js';
import type { Logger } from '../../platform/log.js';
import type { RawHeaders } from './request-headers.js';
import { UpstreamSession, type Reachability, type SessionSettings } from './upstream-session.js';

export interface UpstreamOptions {
  readonly target: HostPort;
  /** Connections to the engine, K >= 1. Default DEFAULT_UPSTREAM_CONNECTIONS. */
  readonly connections?: number;
  /** A probe (health check or PING) is sent this long after the previous one was answered, on every open connection. Default DEFAULT_UPSTREAM_PING_INTERVAL_MS. */
  readonly pingIntervalMs?: number;
  /** SETTINGS (after connecting) or a probe's answer later than this marks a connection unreachable. Default DEFAULT_UPSTREAM_PING_TIMEOUT_MS. */
  readonly pingTimeoutMs?: number;
  /** The least time between two PINGs on a connection (doubled at each too_many_pings). Default DEFAULT_UPSTREAM_KEEPALIVE_INTERVAL_MS. */
  readonly keepaliveIntervalMs?: number;
  /** PING connections that carry no call too. Default false, as gRPC clients. */
  readonly keepaliveWithoutCalls?: boolean;
  /** A connection that answers nothing for this long is destroyed (its calls fail) and reopened. Default 20000. */
  readonly silentSessionMs?: number;
  readonly reconnectMinMs?: number;
  readonly reconnectMaxMs?: number;
  /** HTTP/2 over TLS (ALPN h2) with these files, each new connection taking the current ones; undefined: h2c. */
  readonly tls?: ClientTls | undefined;
  /** Monotonic milliseconds for PING round trips (performance.now unless a test gives a fake). */
  readonly now?: () => number;
}

export type ReachabilityListener = (reachable: boolean) => void;

/**
 * Long enough for an engine stalled by a long GC or a short SIGSTOP to keep its calls; short
 * enough that a dead peer whose socket never errors (no RST, no FIN) is replaced within ~20 s,
 * the order of magnitude the former idle-timeout keepalive gave.
 */
export const DEFAULT_SILENT_SESSION_MS = 20_000;

export class UpstreamPool {
  readonly authority: string;
  private readonly sessions: readonly UpstreamSession[];
  /** What was last logged and told: the first outcome, then every change. */
  private announced: Reachability = 'unknown';
  /** Where the search for the next call's connection starts (ties go round). */
  private next = 0;
  private closed = false;
  private readonly listeners = new Set<ReachabilityListener>();
  private readonly reconnectListeners = new Set<() => void>();

  constructor(
    private readonly options: UpstreamOptions,
    private readonly logger: Logger,
  ) {
    const connections = options.connections ?? DEFAULT_UPSTREAM_CONNECTIONS;
    if (!Number.isInteger(connections) || connections < 1) throw new RangeError(`upstream connections must be a positive integer, got ${connections}`);
    this.authority = `${options.tls ? 'https' : 'http'}://${formatHostPort(options.target)}`;
    const pingTimeoutMs = options.pingTimeoutMs ?? DEFAULT_UPSTREAM_PING_TIMEOUT_MS;
    const settings: SessionSettings = {
      target: options.target,
      authority: this.authority,
      address: this.address,
      pingIntervalMs: options.pingIntervalMs ?? DEFAULT_UPSTREAM_PING_INTERVAL_MS,
      pingTimeoutMs,
      keepaliveIntervalMs: options.keepaliveIntervalMs ?? DEFAULT_UPSTREAM_KEEPALIVE_INTERVAL_MS,
      keepaliveWithoutCalls: options.keepaliveWithoutCalls ?? false,
      // Destroying before the engine is even declared unreachable would cut calls on a mere slow PING.
      silentSessionMs: Math.max(options.silentSessionMs ?? DEFAULT_SILENT_SESSION_MS, pingTimeoutMs),
      reconnectMinMs: options.reconnectMinMs ?? 100,
      reconnectMaxMs: options.reconnectMaxMs ?? 2_000,
      tls: options.tls,
      now: options.now ?? ((): number => performance.now()),
      onReconnect: () => {
        for (const listener of this.reconnectListeners) listener();
      },
    };
    const onChange = (session: UpstreamSession, logFields: Record<string, unknown> | undefined): void => this.sessionChanged(session, logFields);
    this.sessions = Array.from(
      { length: connections },
      (_, i) => new UpstreamSession(i, settings, connections > 1 ? logger.child({ connection: i }) : logger, onChange),
    );
  }

  /** `HOST:PORT` of the engine, for messages and logs. */
  get address(): string {
    return formatHostPort(this.options.target);
  }

  /**
   * True once the engine is known to be unreachable on every connection (refused, silent, not
   * answering probes), but not while a first connection is still being tried: calls then fail fast
   * with UNAVAILABLE, which clients retry elsewhere, instead of waiting on an engine that is not there.
   */
  get down(): boolean {
    return this.sessions.every((session) => session.state === 'unreachable');
  }

  /** At least one connection is reachable. */
  get reachable(): boolean {
    return this.sessions.some((session) => session.state === 'reachable');
  }

  /**
   * Why the engine is not reachable, when it is not; names the engine address (for /ready and
   * logs). With K > 1: how many connections are down, and the reason of the one down longest.
   */
  get unreachableReason(): string {
    return `upstream ${this.address} unreachable: ${this.reason()}`;
  }

  /** False for a session that never got the engine's SETTINGS (refused, unresolvable, silent). */
  wasConnected(session: ClientHttp2Session | undefined): boolean {
    return this.sessions.some((s) => s.wasConnected(session));
  }

  onReachabilityChange(listener: ReachabilityListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Hears each connection reaching the engine again after an earlier connection of its own (a
   * restart, a network break, a GOAWAY): the engine may now be another, with another model or
   * KV size (EngineDiscovery asks again).
   */
  onReconnect(listener: () => void): () => void {
    this.reconnectListeners.add(listener);
    return () => this.reconnectListeners.delete(listener);
  }

  /** Opens every connection; later ones open on demand or after a failure. */
  start(): void {
    for (const session of this.sessions) session.start();
  }

  /**
   * Opens a stream to the engine on the connection picked for it (see the top of this file).
   * Connection failures arrive as the stream's 'error' event; a throw means the request itself
   * is bad (e.g. connection-specific headers) and leaves the connections alone.
   */
  request(headers: OutgoingHttpHeaders | RawHeaders): ClientHttp2Stream {
    return this.pick().request(headers);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.sessions.map((session) => session.close()));
  }

  private pick(): UpstreamSession {
    const sessions = this.sessions;
    const k = sessions.length;
    if (k === 1) return sessions[0]!;
    let best: UpstreamSession | undefined;
    for (let i = 0; i < k; i++) {
      const session = sessions[(this.next + i) % k]!;
      if (session.takesCalls() && (best === undefined || session.openStreams < best.openStreams)) best = session;
    }
    best ??= this.fallback();
    this.next = (best.index + 1) % k;
    return best;
  }

  /** No connection takes calls: one still connecting, else one open but late with its probes, else the next in turn, which opens one. */
  private fallback(): UpstreamSession {
    const k = this.sessions.length;
    let open: UpstreamSession | undefined;
    for (let i = 0; i < k; i++) {
      const session = this.sessions[(this.next + i) % k]!;
      if (session.connecting) return session;
      if (session.open) open ??= session;
    }
    return open ?? this.sessions[this.next]!;
  }

  private reason(): string {
    const sessions = this.sessions;
    if (sessions.length === 1) return sessions[0]!.reason;
    const down = sessions.filter((session) => session.state === 'unreachable');
    if (down.length === 0) return sessions[0]!.reason;
    const first = down.reduce((a, b) => (b.unreachableSince < a.unreachableSince ? b : a));
    return `${down.length} of ${sessions.length} connections down; first: ${first.reason}`;
  }

  /**
   * A connection's reachability changed. With K > 1 that is logged with its index; the pool's
   * own outcome is logged when it first has one (a connection reachable, or all unreachable) and
   * at every change, and listeners hear the changes of `reachable`.
   */
  private sessionChanged(session: UpstreamSession, logFields: Record<string, unknown> | undefined): void {
    if (this.closed) return;
    if (this.sessions.length > 1) {
      const fields = { upstream: this.address, connection: session.index };
      if (session.state === 'reachable') this.logger.info('upstream connection reachable', { ...fields, ...logFields });
      else this.logger.warn('upstream connection unreachable', { ...fields, reason: session.reason });
    }
    const reachable = this.reachable;
    const next: Reachability = reachable ? 'reachable' : this.down || this.announced === 'reachable' ? 'unreachable' : 'unknown';
    if (next === this.announced || next === 'unknown') return;
    const wasReachable = this.announced === 'reachable';
    this.announced = next;
    if (next === 'reachable') this.logger.info('upstream reachable', { upstream: this.address, ...logFields });
    else this.logger.warn('upstream unreachable', { upstream: this.address, reason: this.reason() });
    if (wasReachable !== reachable) for (const listener of this.listeners) listener(reachable);
  }
}
