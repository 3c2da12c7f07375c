/**
 * UpstreamPool: the HTTP/2 connection to the engine. One session carries every call (HTTP/2
 * multiplexes); it is opened eagerly, kept alive with PINGs, replaced on GOAWAY, and reopened
 * with backoff when it fails, so `reachable` reflects the engine within a second or two and a
 * restarted engine is picked up without restarting the sidecar.
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders, type SecureClientSessionOptions } from 'node:http2';
import type { HostPort } from '../config/host-port.js';
import { formatHostPort } from '../config/host-port.js';
import type { Logger } from '../log.js';

export interface UpstreamOptions {
  readonly target: HostPort;
  /** PING interval on an open session; a PING unanswered for this long again drops the session. */
  readonly keepaliveMs?: number;
  readonly reconnectMinMs?: number;
  readonly reconnectMaxMs?: number;
}

export type ReachabilityListener = (reachable: boolean) => void;

// Large windows so a single long stream is not throttled by 64 KiB round trips; memory stays
// bounded because a window only fills when the reader lags, and then flow control stops the sender.
export const STREAM_WINDOW_BYTES = 1 << 20;
const SESSION_OPTIONS: SecureClientSessionOptions = {
  settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
  maxSessionMemory: 256,
  peerMaxConcurrentStreams: 1_000_000,
};

const REQUEST_OPTIONS = Object.freeze({ endStream: false });

export class UpstreamPool {
  readonly authority: string;
  private session: ClientHttp2Session | undefined;
  private isReachable = false;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectPending = false;
  private reconnectDelay: number;
  private lastError: string | undefined;
  private readonly listeners = new Set<ReachabilityListener>();
  private readonly connectedSessions = new WeakSet<ClientHttp2Session>();
  private readonly keepaliveMs: number;
  private readonly reconnectMinMs: number;
  private readonly reconnectMaxMs: number;

  constructor(
    private readonly options: UpstreamOptions,
    private readonly logger: Logger,
  ) {
    this.authority = `http://${formatHostPort(options.target)}`;
    this.keepaliveMs = options.keepaliveMs ?? 10_000;
    this.reconnectMinMs = options.reconnectMinMs ?? 100;
    this.reconnectMaxMs = options.reconnectMaxMs ?? 2_000;
    this.reconnectDelay = this.reconnectMinMs;
  }

  /** `HOST:PORT` of the engine, for messages and logs. */
  get address(): string {
    return formatHostPort(this.options.target);
  }

  get reachable(): boolean {
    return this.isReachable;
  }

  /** Why the engine is not reachable, when it is not. */
  get unreachableReason(): string {
    return `upstream ${this.address} unreachable${this.lastError ? `: ${this.lastError}` : ''}`;
  }

  /** False for a session whose connection never came up (refused, unresolvable, timed out). */
  wasConnected(session: ClientHttp2Session | undefined): boolean {
    return session !== undefined && this.connectedSessions.has(session);
  }

  onReachabilityChange(listener: ReachabilityListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Opens the first session; later ones open on demand or after a failure. */
  start(): void {
    this.ensureSession();
  }

  /**
   * Opens a stream to the engine. Throws only if no session can take a stream even after one
   * retry on a fresh session (the caller answers UNAVAILABLE); connection failures otherwise
   * arrive as the stream's 'error' event.
   */
  request(headers: OutgoingHttpHeaders): ClientHttp2Stream {
    try {
      return this.ensureSession().request(headers, REQUEST_OPTIONS);
    } catch {
      // GOAWAY received or stream ids exhausted on this session: the next one starts afresh.
      this.dropSession(this.session);
      return this.ensureSession().request(headers, REQUEST_OPTIONS);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const session = this.session;
    this.session = undefined;
    if (session && !session.destroyed) {
      await new Promise<void>((resolve) => {
        session.close(() => resolve());
        // Calls still open at shutdown are cut rather than waited on.
        setTimeout(() => session.destroy(), 1000).unref();
      });
    }
  }

  private ensureSession(): ClientHttp2Session {
    if (this.session && !this.session.destroyed && !this.session.closed) return this.session;
    if (this.closed) throw new Error('upstream pool closed');
    clearTimeout(this.reconnectTimer);
    this.reconnectPending = false;
    const session = connect(this.authority, SESSION_OPTIONS);
    this.session = session;
    session.on('connect', () => {
      this.connectedSessions.add(session);
      this.reconnectDelay = this.reconnectMinMs;
      this.lastError = undefined;
      this.setReachable(true);
    });
    session.on('error', (err: NodeJS.ErrnoException) => {
      this.lastError = err.code ? `${err.code} ${err.message.replace(/^\S+ /, '')}` : err.message;
    });
    session.on('goaway', () => {
      // The engine is shutting this connection down; new calls go to a fresh one.
      if (this.session === session) this.session = undefined;
    });
    session.on('close', () => {
      if (this.session === session) this.session = undefined;
      if (!this.session) {
        this.setReachable(false);
        this.scheduleReconnect();
      }
    });
    session.setTimeout(this.keepaliveMs, () => this.ping(session));
    session.unref();
    return session;
  }

  private ping(session: ClientHttp2Session): void {
    if (session.destroyed) return;
    const timer = setTimeout(() => {
      this.lastError = `no PING answer within ${this.keepaliveMs} ms`;
      session.destroy();
    }, this.keepaliveMs);
    timer.unref();
    const sent = session.ping((err) => {
      clearTimeout(timer);
      if (err && !session.destroyed) session.destroy();
    });
    if (!sent) clearTimeout(timer);
  }

  private dropSession(session: ClientHttp2Session | undefined): void {
    if (!session) return;
    if (this.session === session) this.session = undefined;
    session.close();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectPending) return;
    this.reconnectPending = true;
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(this.reconnectMaxMs, this.reconnectDelay * 2);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectPending = false;
      if (!this.closed && !this.session) this.ensureSession();
    }, delay * (0.8 + Math.random() * 0.4));
    this.reconnectTimer.unref();
  }

  private setReachable(reachable: boolean): void {
    if (this.isReachable === reachable) return;
    this.isReachable = reachable;
    if (this.closed) return;
    if (reachable) this.logger.info('upstream reachable', { upstream: this.address });
    else this.logger.warn('upstream unreachable', { upstream: this.address, reason: this.lastError });
    for (const listener of this.listeners) listener(reachable);
  }
}
