/**
 * UpstreamPool: the HTTP/2 connection to the engine. One session carries every call (HTTP/2
 * multiplexes); it is opened eagerly, replaced on GOAWAY, and reopened with backoff when it
 * fails, so a restarted engine is picked up without restarting the sidecar.
 *
 * Reachable means the engine speaks HTTP/2 right now, not that a TCP connection exists: the
 * engine's SETTINGS arrived and, since then, every PING (one per `pingIntervalMs`, whatever the
 * traffic) was answered within `pingTimeoutMs`. A listening socket that never answers (a hung or
 * SIGSTOPped engine, a non-HTTP/2 server) therefore reads unreachable within a few seconds. A slow
 * PING answer only flips the state; the session and its calls stay, because an engine paused for
 * a few seconds (GC, swap) usually comes back. Only a session silent for `silentSessionMs` is
 * destroyed and reopened.
 *
 * The state starts "unknown" so the first outcome (reachable or not) is logged, then every change.
 *
 * With `tls` (--upstream-tls) each new session is HTTP/2 over TLS with the files current at that
 * moment (a rotation reaches the next session; the open one keeps its calls), and a failed
 * handshake (untrusted certificate, wrong name, refused client certificate) is an unreachable
 * engine whose reason says so, in the log and /ready.
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders, type SecureClientSessionOptions } from 'node:http2';
import { connect as tlsConnect } from 'node:tls';
import type { HostPort } from '../../platform/config/host-port.js';
import type { ClientTls } from '../../platform/tls/client-tls.js';
import { formatHostPort } from '../../platform/config/host-port.js';
import { DEFAULT_UPSTREAM_PING_INTERVAL_MS, DEFAULT_UPSTREAM_PING_TIMEOUT_MS } from '../config/sidecar-config.js';
import type { Logger } from '../../platform/log.js';
import type { RawHeaders } from './request-headers.js';

export interface UpstreamOptions {
  readonly target: HostPort;
  /** A PING is sent this long after the previous one was answered, on every open session. Default DEFAULT_UPSTREAM_PING_INTERVAL_MS. */
  readonly pingIntervalMs?: number;
  /** SETTINGS (after connecting) or a PING answer later than this marks the engine unreachable. Default DEFAULT_UPSTREAM_PING_TIMEOUT_MS. */
  readonly pingTimeoutMs?: number;
  /** A session that answers nothing for this long is destroyed (its calls fail) and reopened. Default 20000. */
  readonly silentSessionMs?: number;
  readonly reconnectMinMs?: number;
  readonly reconnectMaxMs?: number;
  /** HTTP/2 over TLS (ALPN h2) with these files, each new session taking the current ones; undefined: h2c. */
  readonly tls?: ClientTls | undefined;
  /** Monotonic milliseconds for PING round trips (performance.now unless a test gives a fake). */
  readonly now?: () => number;
}

/** How far a new session got: a TLS session's TCP connect and handshake are told apart in reasons. */
interface SessionProgress {
  tcp: boolean;
  tls: boolean;
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

/**
 * Long enough for an engine stalled by a long GC or a short SIGSTOP to keep its calls; short
 * enough that a dead peer whose socket never errors (no RST, no FIN) is replaced within ~20 s,
 * the order of magnitude the former idle-timeout keepalive gave.
 */
export const DEFAULT_SILENT_SESSION_MS = 20_000;

const CLOSE_GRACE_MS = 1_000;

type Reachability = 'unknown' | 'reachable' | 'unreachable';

export class UpstreamPool {
  readonly authority: string;
  private session: ClientHttp2Session | undefined;
  private state: Reachability = 'unknown';
  private reason = 'no connection to the engine yet';
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectPending = false;
  private reconnectDelay: number;
  private readonly listeners = new Set<ReachabilityListener>();
  private readonly reconnectListeners = new Set<() => void>();
  /** A session has reached the engine before: the next one to do so is a reconnect. */
  private everConnected = false;
  private readonly connectedSessions = new WeakSet<ClientHttp2Session>();
  /** The TLS files' generation the current session was opened with. */
  private sessionTlsGeneration = 0;
  private readonly pingIntervalMs: number;
  private readonly pingTimeoutMs: number;
  private readonly silentSessionMs: number;
  private readonly reconnectMinMs: number;
  private readonly reconnectMaxMs: number;
  private readonly now: () => number;

  constructor(
    private readonly options: UpstreamOptions,
    private readonly logger: Logger,
  ) {
    this.now = options.now ?? ((): number => performance.now());
    this.authority = `${options.tls ? 'https' : 'http'}://${formatHostPort(options.target)}`;
    this.pingIntervalMs = options.pingIntervalMs ?? DEFAULT_UPSTREAM_PING_INTERVAL_MS;
    this.pingTimeoutMs = options.pingTimeoutMs ?? DEFAULT_UPSTREAM_PING_TIMEOUT_MS;
    // Destroying before the engine is even declared unreachable would cut calls on a mere slow PING.
    this.silentSessionMs = Math.max(options.silentSessionMs ?? DEFAULT_SILENT_SESSION_MS, this.pingTimeoutMs);
    this.reconnectMinMs = options.reconnectMinMs ?? 100;
    this.reconnectMaxMs = options.reconnectMaxMs ?? 2_000;
    this.reconnectDelay = this.reconnectMinMs;
  }

  /** `HOST:PORT` of the engine, for messages and logs. */
  get address(): string {
    return formatHostPort(this.options.target);
  }

  /**
   * True once the engine is known to be unreachable (refused, silent, not answering PINGs), but
   * not while the first connection is still being tried: calls then fail fast with UNAVAILABLE,
   * which clients retry elsewhere, instead of waiting on an engine that is not there.
   */
  get down(): boolean {
    return this.state === 'unreachable';
  }

  get reachable(): boolean {
    return this.state === 'reachable';
  }

  /** Why the engine is not reachable, when it is not; names the engine address (for /ready and logs). */
  get unreachableReason(): string {
    return `upstream ${this.address} unreachable: ${this.reason}`;
  }

  /** False for a session that never got the engine's SETTINGS (refused, unresolvable, silent). */
  wasConnected(session: ClientHttp2Session | undefined): boolean {
    return session !== undefined && this.connectedSessions.has(session);
  }

  onReachabilityChange(listener: ReachabilityListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Hears every new connection to the engine after the first (its SETTINGS arrived): the engine
   * may have restarted, with another model or KV size (EngineDiscovery asks again).
   */
  onReconnect(listener: () => void): () => void {
    this.reconnectListeners.add(listener);
    return () => this.reconnectListeners.delete(listener);
  }

  /** Opens the first session; later ones open on demand or after a failure. */
  start(): void {
    this.ensureSession();
  }

  /**
   * Opens a stream to the engine. Connection failures arrive as the stream's 'error' event; a
   * throw means the request itself is bad (e.g. connection-specific headers) and leaves the shared
   * session alone. node throws for an unusable session only once it is closed (GOAWAY) or
   * destroyed, and ensureSession() never returns such a session, so no retry is needed here.
   */
  request(headers: OutgoingHttpHeaders | RawHeaders): ClientHttp2Stream {
    // @types/node 20 does not know the raw form; only Nodes that take it are given one (RAW_REQUEST_HEADERS).
    return this.ensureSession().request(headers as OutgoingHttpHeaders, REQUEST_OPTIONS);
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
    this.sessionTlsGeneration = this.options.tls?.generation ?? 0;
    const progress: SessionProgress = { tcp: false, tls: false };
    const session = connect(this.authority, this.options.tls ? { ...SESSION_OPTIONS, createConnection: () => this.openTls(progress) } : SESSION_OPTIONS);
    this.session = session;
    let closeReason: string | undefined;
    session.on('error', (err: NodeJS.ErrnoException) => {
      // TLS 1.3 completes the client's side of the handshake before the server checks its certificate: a refusal arrives as an SSL alert after it.
      const tls = this.options.tls;
      const tlsFailed = tls !== undefined && ((progress.tcp && !progress.tls) || /^ERR_SSL_/.test(err.code ?? ''));
      if (tlsFailed) tls.handshakeFailed();
      closeReason = tlsFailed ? `TLS handshake with the engine failed: ${describeError(err)}` : describeError(err);
    });
    session.on('goaway', () => {
      // The engine is shutting this connection down; new calls go to a fresh one.
      if (this.session === session) this.session = undefined;
    });
    session.on('close', () => {
      if (this.session === session) this.session = undefined;
      closeReason ??= this.closedWithoutError(session, progress);
      if (this.session) return; // already replaced (GOAWAY, TLS renewal)
      // "Down" means a connection could not be made, not that one ended: an engine that drops a
      // connection (GOAWAY with an error, a reset socket) is usually still up, and the next call
      // opens a new session on demand. The reconnect below tells which it is.
      if (this.wasConnected(session)) this.logger.info('engine connection closed; reconnecting', { upstream: this.address, reason: closeReason });
      else this.setState('unreachable', closeReason);
      this.scheduleReconnect();
    });
    this.watchLiveness(session, progress, (reason) => (closeReason = reason));
    session.unref();
    return session;
  }

  /**
   * True (and the session retired) when the TLS files changed since `session` was opened: new
   * calls go to a new session with the new files, while the old one's calls finish on it (close()
   * sends no new stream there and ends it once they are done).
   */
  private tlsOutdated(session: ClientHttp2Session): boolean {
    const tls = this.options.tls;
    if (tls === undefined || tls.generation === this.sessionTlsGeneration || !this.wasConnected(session)) return false;
    this.logger.info('engine connection renewed: the TLS files changed; calls in progress finish on the old one', { upstream: this.address });
    this.session = undefined;
    session.close();
    return true;
  }

  /**
   * Why a session closed that reported no error. Over TLS 1.3 an engine refusing the client
   * certificate does so after the client's side of the handshake, and its alert is often lost
   * with the connection: a TLS session closed before any HTTP/2 SETTINGS is counted as a failed
   * handshake and said so.
   */
  private closedWithoutError(session: ClientHttp2Session, progress: SessionProgress): string {
    const tls = this.options.tls;
    if (tls === undefined || !progress.tcp || this.wasConnected(session)) return 'the engine closed the connection';
    if (!progress.tls) return 'the engine closed the connection during the TLS handshake';
    tls.handshakeFailed();
    return 'TLS handshake with the engine failed: the engine closed the connection right after it, before HTTP/2 SETTINGS (as an engine refusing the client certificate does)';
  }

  /** The TLS socket of a new session, with the files current now; notes when TCP and the handshake complete. */
  private openTls(progress: SessionProgress): ReturnType<typeof tlsConnect> {
    const { host, port } = this.options.target;
    const socket = tlsConnect({ host, port, ALPNProtocols: ['h2'], ...this.options.tls!.connectOptions(host) });
    socket.once('connect', () => (progress.tcp = true));
    socket.once('secureConnect', () => (progress.tls = true));
    // An error on a TLS socket (e.g. the engine refusing our certificate after the handshake, TLS
    // 1.3) leaves it open, and node's HTTP/2 session then waits for it to close for ever: never a
    // 'close', never reconnected. Destroying it lets the session close with the error.
    socket.on('error', () => socket.destroy());
    return socket;
  }

  /**
   * Probes the session: first the engine's SETTINGS, then one PING at a time. A probe unanswered
   * after pingTimeoutMs marks the engine unreachable (if this is the current session); its late
   * answer marks it reachable again; after silentSessionMs the session is destroyed.
   */
  private watchLiveness(session: ClientHttp2Session, progress: SessionProgress, setCloseReason: (reason: string) => void): void {
    let probeSentAt = this.now();
    let overdue = false;
    let overdueTimer: NodeJS.Timeout | undefined;
    let silenceTimer: NodeJS.Timeout | undefined;
    let nextPingTimer: NodeJS.Timeout | undefined;
    const isCurrent = (): boolean => this.session === session;

    const startProbeTimers = (what: () => string): void => {
      probeSentAt = this.now();
      overdue = false;
      overdueTimer = unrefTimer(
        setTimeout(() => {
          // Defer past the poll phase: if this process itself was stalled, an answer already in
          // the socket is read first instead of being mistaken for silence.
          setImmediate(() => {
            if (overdueTimer === undefined || session.destroyed) return;
            overdue = true;
            if (isCurrent()) this.setState('unreachable', what());
          });
        }, this.pingTimeoutMs),
      );
      silenceTimer = unrefTimer(
        setTimeout(() => {
          setImmediate(() => {
            if (silenceTimer === undefined || session.destroyed) return;
            const reason = `the engine answered nothing for ${this.silentSessionMs} ms (${what()}); connection reopened`;
            setCloseReason(reason);
            if (isCurrent()) this.setState('unreachable', reason);
            session.destroy();
          });
        }, this.silentSessionMs),
      );
    };
    const answered = (): void => {
      clearTimeout(overdueTimer);
      clearTimeout(silenceTimer);
      overdueTimer = silenceTimer = undefined;
      if (isCurrent()) this.setState('reachable', undefined, overdue ? { lateAnswerMs: Math.round(this.now() - probeSentAt) } : undefined);
      nextPingTimer = unrefTimer(setTimeout(ping, this.pingIntervalMs));
    };
    const ping = (): void => {
      // node cannot PING a closed session (one draining after GOAWAY); its calls end on their own.
      if (session.destroyed || session.closed) return;
      startProbeTimers(() => `engine did not answer PING within ${this.pingTimeoutMs} ms`);
      // An error here means the session is going away; its 'close' handler reports that.
      session.ping((err) => {
        if (!err) answered();
      });
    };

    startProbeTimers(() =>
      !progress.tcp
        ? `no TCP connection to the engine within ${this.pingTimeoutMs} ms`
        : this.options.tls && !progress.tls
          ? `no TLS handshake with the engine within ${this.pingTimeoutMs} ms`
          : `no HTTP/2 SETTINGS from the engine within ${this.pingTimeoutMs} ms`,
    );
    // h2c: the session's connect is TCP's; TLS: openTls notes both steps.
    session.once('connect', () => (progress.tcp = true));
    session.once('remoteSettings', () => {
      this.connectedSessions.add(session);
      this.reconnectDelay = this.reconnectMinMs;
      answered();
      if (this.everConnected) for (const listener of this.reconnectListeners) listener();
      this.everConnected = true;
    });
    session.once('close', () => {
      clearTimeout(overdueTimer);
      clearTimeout(silenceTimer);
      clearTimeout(nextPingTimer);
      overdueTimer = silenceTimer = undefined;
    });
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectPending) return;
    this.reconnectPending = true;
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(this.reconnectMaxMs, this.reconnectDelay * 2);
    this.reconnectTimer = setTimeout(
      () => {
        this.reconnectPending = false;
        if (!this.closed && !this.session) this.ensureSession();
      },
      delay * (0.8 + Math.random() * 0.4),
    );
    this.reconnectTimer.unref();
  }

  /** Logs the first outcome and every change; listeners hear only changes of `reachable`. */
  private setState(next: 'reachable' | 'unreachable', reason?: string, logFields?: Record<string, unknown>): void {
    if (reason !== undefined) this.reason = reason;
    if (this.state === next) return;
    const wasReachable = this.reachable;
    this.state = next;
    if (this.closed) return;
    if (next === 'reachable') this.logger.info('upstream reachable', { upstream: this.address, ...logFields });
    else this.logger.warn('upstream unreachable', { upstream: this.address, reason: this.reason });
    if (wasReachable !== this.reachable) for (const listener of this.listeners) listener(this.reachable);
  }
}

/** "connect ECONNREFUSED 127.0.0.1:1" -> "ECONNREFUSED 127.0.0.1:1"; other errors get their code in front. */
function describeError(err: NodeJS.ErrnoException & { reason?: unknown }): string {
  // OpenSSL's messages are its error stack ("80EC...:error:0A00045C:SSL routines:...:SSL alert number 116"); its reason says it.
  if (typeof err.reason === 'string' && err.code?.startsWith('ERR_SSL_')) return `${err.code} (${err.reason})`;
  const message = err.syscall && err.message.startsWith(`${err.syscall} `) ? err.message.slice(err.syscall.length + 1) : err.message;
  return err.code && !message.startsWith(err.code) ? `${err.code} ${message}` : message;
}

function unrefTimer(timer: NodeJS.Timeout): NodeJS.Timeout {
  timer.unref();
  return timer;
}
