/**
 * UpstreamSession: one HTTP/2 connection to the engine, kept up on its own. It is opened eagerly,
 * replaced on GOAWAY (its calls finish on the old one), and reopened with backoff when it fails,
 * so a restarted engine is picked up without restarting the sidecar. UpstreamPool (upstream.ts)
 * holds one or more of them and spreads new calls over them.
 *
 * Reachable means the engine speaks HTTP/2 on this connection right now, not that a TCP
 * connection exists: the engine's SETTINGS arrived and, since then, every probe (one per
 * `pingIntervalMs`, whatever the traffic: a health-check call, or a PING where gRPC's keepalive
 * rules allow one, upstream-liveness.ts) was answered within `pingTimeoutMs`. A listening socket
 * that never answers (a hung or SIGSTOPped engine, a non-HTTP/2 server) therefore reads
 * unreachable within a few seconds. A slow answer only flips the state; the connection and
 * its calls stay, because an engine paused for a few seconds (GC, swap) usually comes back. Only
 * a connection silent for `silentSessionMs` is destroyed and reopened.
 *
 * The state starts "unknown" so that the first outcome (reachable or not) is reported, then every
 * change; the pool logs them and tells its listeners.
 *
 * With `tls` (--upstream-tls) each new connection is HTTP/2 over TLS with the files current at
 * that moment (a rotation reaches the next connection; the open one keeps its calls), and a failed
 * handshake (untrusted certificate, wrong name, refused client certificate) is an unreachable
 * engine whose reason says so, in the log and /ready.
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders, type SecureClientSessionOptions } from 'node:http2';
import { connect as tlsConnect } from 'node:tls';
import type { HostPort } from '../../platform/config/host-port.js';
import type { ClientTls } from '../../platform/tls/client-tls.js';
import type { Logger } from '../../platform/log.js';
import type { RawHeaders } from './request-headers.js';
import { Keepalive, watchLiveness } from './upstream-liveness.js';

/** What every connection of a pool shares: the engine, the timings and the TLS files. */
export interface SessionSettings {
  readonly target: HostPort;
  /** `http://HOST:PORT` or `https://HOST:PORT`. */
  readonly authority: string;
  /** `HOST:PORT`, for logs. */
  readonly address: string;
  /** Between a probe's answer and the next probe (upstream-liveness.ts). */
  readonly pingIntervalMs: number;
  readonly pingTimeoutMs: number;
  /** The least time between two PINGs, before any too_many_pings doubles it. */
  readonly keepaliveIntervalMs: number;
  /** PING while the connection carries no call too (the engine must permit it). */
  readonly keepaliveWithoutCalls: boolean;
  /** At least pingTimeoutMs. */
  readonly silentSessionMs: number;
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  readonly tls: ClientTls | undefined;
  readonly now: () => number;
  /** This connection reached the engine again after an earlier connection of its own (the engine may have restarted). */
  readonly onReconnect: () => void;
}

export type Reachability = 'unknown' | 'reachable' | 'unreachable';

/** Told every change of a connection's reachability, with fields for the log line (lateAnswerMs). */
export type SessionStateListener = (session: UpstreamSession, logFields: Record<string, unknown> | undefined) => void;

/** How far a new connection got: a TLS connection's TCP connect and handshake are told apart in reasons. */
interface SessionProgress {
  tcp: boolean;
  tls: boolean;
}

// Large windows so a single long stream is not throttled by 64 KiB round trips; memory stays
// bounded because a window only fills when the reader lags, and then flow control stops the sender.
export const STREAM_WINDOW_BYTES = 1 << 20;
const SESSION_OPTIONS: SecureClientSessionOptions = {
  settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES },
  maxSessionMemory: 256,
  peerMaxConcurrentStreams: 1_000_000,
};

const REQUEST_OPTIONS = Object.freeze({ endStream: false });

const CLOSE_GRACE_MS = 1_000;

/** Open streams of one node session (a replaced connection's streams count on its own record). */
interface StreamCount {
  open: number;
}
const COUNT = Symbol('upstream stream count');
type CountedStream = ClientHttp2Stream & { [COUNT]?: StreamCount };

// One module-level listener, so that counting costs no closure per call.
function uncount(this: CountedStream): void {
  this[COUNT]!.open--;
}

export class UpstreamSession {
  private session: ClientHttp2Session | undefined;
  private count: StreamCount = { open: 0 };
  private stateNow: Reachability = 'unknown';
  private reasonNow = 'no connection to the engine yet';
  private unreachableAt = Infinity;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectPending = false;
  private reconnectDelay: number;
  private readonly connectedSessions = new WeakSet<ClientHttp2Session>();
  private readonly keepalive: Keepalive;
  /** One of this connection's sessions reached the engine before: the next one to do so is a reconnect. */
  private everConnected = false;
  /** The TLS files' generation the current connection was opened with. */
  private sessionTlsGeneration = 0;

  constructor(
    /** Its place in the pool, 0-based, for logs. */
    readonly index: number,
    private readonly settings: SessionSettings,
    private readonly logger: Logger,
    private readonly onStateChange: SessionStateListener,
  ) {
    this.reconnectDelay = settings.reconnectMinMs;
    this.keepalive = new Keepalive(settings.keepaliveIntervalMs, settings.keepaliveWithoutCalls, settings.now, logger, settings.address);
  }

  get state(): Reachability {
    return this.stateNow;
  }

  /** Why this connection is not reachable, when it is not; the last such reason otherwise. */
  get reason(): string {
    return this.reasonNow;
  }

  /** When (settings.now) it last became unreachable; Infinity while it is not. */
  get unreachableSince(): number {
    return this.unreachableAt;
  }

  /** Calls open on the current connection (the liveness probes not counted). */
  get openStreams(): number {
    return this.count.open;
  }

  /**
   * True when a new call may go to this connection now: the engine's SETTINGS came on it, its
   * last probe was answered in time, it is neither closing (GOAWAY) nor destroyed, and its TLS
   * files are current. A connection whose files changed is retired here and its replacement
   * opened (not yet usable: it has no SETTINGS yet).
   */
  takesCalls(): boolean {
    const session = this.session;
    if (session === undefined || this.stateNow !== 'reachable' || !this.connectedSessions.has(session) || session.closed || session.destroyed) return false;
    if (!this.tlsOutdated(session)) return true;
    this.ensureSession();
    return false;
  }

  /** A connection is open and not closing (connected or not). */
  get open(): boolean {
    const session = this.session;
    return session !== undefined && !session.closed && !session.destroyed;
  }

  /** A connection is open that has not had the engine's SETTINGS yet. */
  get connecting(): boolean {
    return this.open && !this.connectedSessions.has(this.session!);
  }

  /** False for a node session of this connection that never got the engine's SETTINGS (refused, unresolvable, silent). */
  wasConnected(session: ClientHttp2Session | undefined): boolean {
    return session !== undefined && this.connectedSessions.has(session);
  }

  start(): void {
    this.ensureSession();
  }

  /**
   * Opens a stream on this connection, opening the connection first when there is none.
   * Connection failures arrive as the stream's 'error' event; a throw means the request itself is
   * bad (e.g. connection-specific headers) and leaves the shared connection alone. node throws
   * for an unusable session only once it is closed (GOAWAY) or destroyed, and ensureSession()
   * never returns such a session, so no retry is needed here.
   */
  request(headers: OutgoingHttpHeaders | RawHeaders): ClientHttp2Stream {
    const session = this.ensureSession();
    // @types/node 20 does not know the raw form; only Nodes that take it are given one (RAW_REQUEST_HEADERS).
    const stream: CountedStream = session.request(headers as OutgoingHttpHeaders, REQUEST_OPTIONS);
    // Counted for the pool (the least busy connection) and for keepalive (no PING without calls).
    const count = this.count;
    count.open++;
    stream[COUNT] = count;
    stream.on('close', uncount);
    return stream;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const session = this.session;
    this.session = undefined;
    if (session && !session.destroyed) {
      await new Promise<void>((resolve) => {
        // Calls still open at shutdown are cut rather than waited on. After a graceful close node
        // waits for the engine to close its end, which a hung engine never does: stop waiting then.
        const timer = setTimeout(() => {
          session.destroy();
          resolve();
        }, CLOSE_GRACE_MS);
        session.close(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private ensureSession(): ClientHttp2Session {
    if (this.session && !this.session.destroyed && !this.session.closed && !this.tlsOutdated(this.session)) return this.session;
    if (this.closed) throw new Error('upstream pool closed');
    clearTimeout(this.reconnectTimer);
    this.reconnectPending = false;
    const { tls } = this.settings;
    this.sessionTlsGeneration = tls?.generation ?? 0;
    const progress: SessionProgress = { tcp: false, tls: false };
    const session = connect(this.settings.authority, tls ? { ...SESSION_OPTIONS, createConnection: () => this.openTls(progress) } : SESSION_OPTIONS);
    this.session = session;
    const count: StreamCount = (this.count = { open: 0 });
    let closeReason: string | undefined;
    session.on('error', (err: NodeJS.ErrnoException) => {
      // TLS 1.3 completes the client's side of the handshake before the server checks its certificate: a refusal arrives as an SSL alert after it.
      const tlsFailed = tls !== undefined && ((progress.tcp && !progress.tls) || /^ERR_SSL_/.test(err.code ?? ''));
      if (tlsFailed) tls.handshakeFailed();
      closeReason = tlsFailed ? `TLS handshake with the engine failed: ${describeError(err)}` : describeError(err);
    });
    session.on('goaway', () => {
      // The engine is shutting this connection down: its calls finish on it, new calls go to a
      // fresh one, opened on demand or after the backoff (never in a tight loop with an engine
      // that sends GOAWAY on every connection).
      if (this.session !== session) return;
      this.session = undefined;
      this.scheduleReconnect();
    });
    session.on('close', () => {
      if (this.session === session) this.session = undefined;
      closeReason ??= this.closedWithoutError(session, progress);
      if (this.session) return; // already replaced (GOAWAY, TLS renewal)
      // "Down" means a connection could not be made, not that one ended: an engine that drops a
      // connection (GOAWAY with an error, a reset socket) is usually still up, and the next call
      // opens a new connection on demand. The reconnect below tells which it is.
      if (this.wasConnected(session)) this.logger.info('engine connection closed; reconnecting', { upstream: this.settings.address, reason: closeReason });
      else this.setState('unreachable', closeReason);
      this.scheduleReconnect();
    });
    // h2c: the session's connect is TCP's; TLS: openTls notes both steps.
    session.once('connect', () => (progress.tcp = true));
    watchLiveness(session, this.settings, this.keepalive, {
      isCurrent: () => this.session === session,
      reachable: (logFields) => this.setState('reachable', undefined, logFields),
      unreachable: (reason) => this.setState('unreachable', reason),
      connected: () => {
        this.connectedSessions.add(session);
        this.reconnectDelay = this.settings.reconnectMinMs;
        if (this.everConnected) this.settings.onReconnect();
        this.everConnected = true;
      },
      closing: (reason) => (closeReason = reason),
      openCalls: () => count.open,
      settingsReason: () => this.settingsReason(progress),
    });
    session.unref();
    return session;
  }

  /**
   * True (and the connection retired) when the TLS files changed since `session` was opened: new
   * calls go to a new connection with the new files, while the old one's calls finish on it
   * (close() sends no new stream there and ends it once they are done).
   */
  private tlsOutdated(session: ClientHttp2Session): boolean {
    const tls = this.settings.tls;
    if (tls === undefined || tls.generation === this.sessionTlsGeneration || !this.wasConnected(session)) return false;
    this.logger.info('engine connection renewed: the TLS files changed; calls in progress finish on the old one', { upstream: this.settings.address });
    this.session = undefined;
    session.close();
    return true;
  }

  /** Why a new connection has no SETTINGS yet, when they are late: how far it got. */
  private settingsReason(progress: SessionProgress): string {
    const { pingTimeoutMs, tls } = this.settings;
    if (!progress.tcp) return `no TCP connection to the engine within ${pingTimeoutMs} ms`;
    if (tls && !progress.tls) return `no TLS handshake with the engine within ${pingTimeoutMs} ms`;
    return `no HTTP/2 SETTINGS from the engine within ${pingTimeoutMs} ms`;
  }

  /**
   * Why a connection closed that reported no error. Over TLS 1.3 an engine refusing the client
   * certificate does so after the client's side of the handshake, and its alert is often lost
   * with the connection: a TLS connection closed before any HTTP/2 SETTINGS is counted as a
   * failed handshake and said so.
   */
  private closedWithoutError(session: ClientHttp2Session, progress: SessionProgress): string {
    const tls = this.settings.tls;
    if (tls === undefined || !progress.tcp || this.wasConnected(session)) return 'the engine closed the connection';
    if (!progress.tls) return 'the engine closed the connection during the TLS handshake';
    tls.handshakeFailed();
    return 'TLS handshake with the engine failed: the engine closed the connection right after it, before HTTP/2 SETTINGS (as an engine refusing the client certificate does)';
  }

  /** The TLS socket of a new connection, with the files current now; notes when TCP and the handshake complete. */
  private openTls(progress: SessionProgress): ReturnType<typeof tlsConnect> {
    const { host, port } = this.settings.target;
    const socket = tlsConnect({ host, port, ALPNProtocols: ['h2'], ...this.settings.tls!.connectOptions(host) });
    socket.once('connect', () => (progress.tcp = true));
    socket.once('secureConnect', () => (progress.tls = true));
    // An error on a TLS socket (e.g. the engine refusing our certificate after the handshake, TLS
    // 1.3) leaves it open, and node's HTTP/2 session then waits for it to close for ever: never a
    // 'close', never reconnected. Destroying it lets the session close with the error.
    socket.on('error', () => socket.destroy());
    return socket;
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectPending) return;
    this.reconnectPending = true;
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(this.settings.reconnectMaxMs, this.reconnectDelay * 2);
    this.reconnectTimer = setTimeout(
      () => {
        this.reconnectPending = false;
        if (!this.closed && !this.session) this.ensureSession();
      },
      delay * (0.8 + Math.random() * 0.4),
    );
    this.reconnectTimer.unref();
  }

  /** Keeps the latest reason; the listener hears the first outcome and every change. */
  private setState(next: 'reachable' | 'unreachable', reason?: string, logFields?: Record<string, unknown>): void {
    if (reason !== undefined) this.reasonNow = reason;
    if (this.stateNow === next) return;
    this.stateNow = next;
    this.unreachableAt = next === 'unreachable' ? this.settings.now() : Infinity;
    this.onStateChange(this, logFields);
  }
}

/** "connect ECONNREFUSED 127.0.0.1:1" -> "ECONNREFUSED 127.0.0.1:1"; other errors get their code in front. */
function describeError(err: NodeJS.ErrnoException & { reason?: unknown }): string {
  // OpenSSL's messages are its error stack ("80EC...:error:0A00045C:SSL routines:...:SSL alert number 116"); its reason says it.
  if (typeof err.reason === 'string' && err.code?.startsWith('ERR_SSL_')) return `${err.code} (${err.reason})`;
  const message = err.syscall && err.message.startsWith(`${err.syscall} `) ? err.message.slice(err.syscall.length + 1) : err.message;
  return err.code && !message.startsWith(err.code) ? `${err.code} ${message}` : message;
}
