/**
 * Per-connection limits on the gRPC ingress, so connections that do no work cannot pile up:
 *   handshake  the client's HTTP/2 preface and SETTINGS must arrive within `handshakeTimeoutMs`
 *              of the TCP connection, or the connection is destroyed (a socket that says nothing).
 *   liveness   while a connection has open streams it is PINGed every `handshakeTimeoutMs`; a PING
 *              still unanswered at the next tick destroys it. Node stops reading a connection after
 *              a client protocol error (DATA on stream 0, a self-dependent PRIORITY...) and then
 *              emits nothing at all, not even when the client closes its socket: without this its
 *              calls would hold their engine slots forever.
 *   closing    a closing connection with no open stream only end()s its socket (our FIN) and
 *              waits for the client's; a client that never sends one would keep the socket, and
 *              the server's close(), for ever. As Envoy's delayed_close_timeout: the socket is
 *              destroyed DELAYED_CLOSE_MS after our FIN (closeAfterFin).
 *   idle       a connection with no open stream for `idleTimeoutMs` gets GOAWAY and is closed.
 *              Idle means no complete request, not no bytes: a client dripping one CONTINUATION
 *              frame at a time (slowloris) has no open stream and is closed like a silent one.
 *   resets     a connection whose client resets most of its calls before any answer and soon
 *              after sending them (isEarlyReset) is a Rapid Reset attacker spreading HEADERS and
 *              RST_STREAM over several reads, as Envoy and nginx judge since CVE-2023-44487. Both
 *              counts decay (DecayingCount, τ = EARLY_RESET_WINDOW_MS), so the rule reads what the
 *              connection does now: at least EARLY_RESET_MIN_STREAMS streams in about the last
 *              window, more than half of them reset early. Such a connection stops taking calls
 *              with a graceful GOAWAY: NO_ERROR and the last stream it processed, so the calls it
 *              already has finish (a node client, such as our frontend's grpc-js, fails every open
 *              stream on a GOAWAY with an error code) and the client retries the later ones on a
 *              new connection, as the last-stream-id tells it they were never processed.
 * The number of streams per connection is bounded by SETTINGS_MAX_CONCURRENT_STREAMS, which the
 * server advertises (node refuses streams beyond it with RST_STREAM(REFUSED_STREAM)).
 */
import type { Http2Session, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { Logger } from '../../platform/log.js';
import { DecayingCount } from './decaying-count.js';

export interface ConnectionLimitOptions {
  /** 0 = never close idle connections. */
  readonly idleTimeoutMs: number;
  readonly handshakeTimeoutMs: number;
  readonly logger: Logger;
  /** Milliseconds for the idle clock (Date.now unless a test gives a fake). */
  readonly now?: () => number;
}

/** How long a closing connection may take to finish (its last frames, the client's FIN) before it is destroyed. */
export const DELAYED_CLOSE_MS = 1000;
/** Streams a connection must have opened in about the last window before its early-reset ratio is judged. */
export const EARLY_RESET_MIN_STREAMS = 100;
/**
 * Only a reset this soon after the call arrived counts (Envoy's premature-reset rule): calls a
 * frontend gives up on after waiting in an overloaded queue are not an attack. Also the time
 * constant of the decaying counts the rule reads.
 */
export const EARLY_RESET_WINDOW_MS = 1000;

const TRACKER = Symbol('dynamo-sidecar.connection');

class ConnectionTracker {
  private openStreams = 0;
  /** Streams opened and early resets, over about the last EARLY_RESET_WINDOW_MS. */
  private readonly recentStreams: DecayingCount;
  private readonly recentEarlyResets: DecayingCount;
  private shed = false;
  private idleSince: number;
  private idleTimer: NodeJS.Timeout | undefined;
  private handshakeTimer: NodeJS.Timeout | undefined;
  private livenessTimer: NodeJS.Timeout | undefined;
  private pingOutstanding = false;
  private readonly now: () => number;

  constructor(
    private readonly session: Http2Session,
    private readonly options: ConnectionLimitOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.idleSince = this.now();
    this.recentStreams = new DecayingCount(EARLY_RESET_WINDOW_MS, this.idleSince);
    this.recentEarlyResets = new DecayingCount(EARLY_RESET_WINDOW_MS, this.idleSince);
    this.handshakeTimer = setTimeout(() => this.onHandshakeTimeout(), options.handshakeTimeoutMs);
    this.handshakeTimer.unref();
    session.once('remoteSettings', () => this.onHandshakeDone());
    session.once('close', () => this.stop());
  }

  streamOpened(): void {
    this.openStreams++;
    this.recentStreams.add(this.now());
  }

  /** More than one recent call in ten reset before any answer: its next calls wait for a dispatch turn. */
  get resetsEarly(): boolean {
    const now = this.now();
    return this.recentEarlyResets.read(now) * 10 > this.recentStreams.read(now);
  }

  /** The client reset a call before any answer; too many of those and the connection takes no more. */
  earlyReset(): void {
    const now = this.now();
    this.recentEarlyResets.add(now);
    const streams = this.recentStreams.read(now);
    const earlyResets = this.recentEarlyResets.read(now);
    if (streams < EARLY_RESET_MIN_STREAMS || earlyResets * 2 <= streams || this.shed || this.session.destroyed || this.session.closed) return;
    this.shed = true;
    this.options.logger.warn('client connection takes no new calls: most of its recent calls were reset before any answer (Rapid Reset)', {
      remote: this.session.socket?.remoteAddress,
      recent_streams: Math.round(streams),
      recent_early_resets: Math.round(earlyResets),
      open_streams: this.openStreams,
    });
    // Graceful, as HTTP/2 intends: close() sends GOAWAY(NO_ERROR) with the last stream nghttp2
    // processed, so those streams may finish and later ones are refused, which the client knows
    // it may retry; the connection ends once its open calls have ended, and they are bounded like
    // any call (deadline, liveness PINGs).
    this.session.close();
  }

  streamClosed(): void {
    if (--this.openStreams === 0) this.idleSince = this.now();
  }

  private onHandshakeDone(): void {
    clearTimeout(this.handshakeTimer);
    this.handshakeTimer = undefined;
    this.livenessTimer = setInterval(() => this.onLivenessTick(), this.options.handshakeTimeoutMs);
    this.livenessTimer.unref();
    const idleMs = this.options.idleTimeoutMs;
    if (idleMs > 0) {
      this.idleSince = this.now();
      this.idleTimer = setTimeout(() => this.onIdleCheck(), idleMs);
      this.idleTimer.unref();
    }
  }

  /** A connection with open calls must answer a PING within one tick. */
  private onLivenessTick(): void {
    const session = this.session;
    if (session.destroyed) return;
    if (this.pingOutstanding) {
      this.options.logger.warn('client connection closed: it stopped answering PINGs with calls open', {
        remote: session.socket?.remoteAddress,
        open_streams: this.openStreams,
      });
      session.destroy();
      return;
    }
    if (this.openStreams === 0) return;
    try {
      this.pingOutstanding = session.ping(() => (this.pingOutstanding = false));
    } catch {
      session.destroy(); // a session that cannot even take a PING is gone
    }
  }

  private onHandshakeTimeout(): void {
    this.handshakeTimer = undefined;
    this.session.destroy();
  }

  /** One timer per connection, re-armed for the rest of the idle period instead of per stream. */
  private onIdleCheck(): void {
    const idleMs = this.options.idleTimeoutMs;
    const idleFor = this.now() - this.idleSince;
    if (this.openStreams > 0 || idleFor < idleMs) {
      this.idleTimer = setTimeout(() => this.onIdleCheck(), this.openStreams > 0 ? idleMs : idleMs - idleFor);
      this.idleTimer.unref();
      return;
    }
    this.idleTimer = undefined;
    const session = this.session;
    session.close(); // GOAWAY; with no open stream it closes at once
    setTimeout(() => session.destroy(), DELAYED_CLOSE_MS).unref();
  }

  private stop(): void {
    clearTimeout(this.handshakeTimer);
    clearTimeout(this.idleTimer);
    clearInterval(this.livenessTimer);
  }
}

type Tracked = Http2Session & { [TRACKER]?: ConnectionTracker };

/** Destroys `socket` DELAYED_CLOSE_MS after we end our side of it, unless the client closed it first. */
export function closeAfterFin(socket: Socket): void {
  socket.once('finish', () => {
    const timer = setTimeout(() => socket.destroy(), DELAYED_CLOSE_MS).unref();
    socket.once('close', () => clearTimeout(timer));
  });
}

/** Starts the handshake and idle clocks of a new client connection. */
export function limitConnection(session: Http2Session, options: ConnectionLimitOptions): void {
  (session as Tracked)[TRACKER] = new ConnectionTracker(session, options);
}

/** Counts `stream` as open on its connection until it closes. */
export function trackStream(stream: ServerHttp2Stream): void {
  const tracker = (stream.session as Tracked | undefined)?.[TRACKER];
  if (!tracker) return;
  tracker.streamOpened();
  // The tracker is taken now: a stream the client reset is destroyed before its 'close', and a
  // destroyed stream's `session` is undefined, so a lookup then would leave it counted as open.
  stream.once('close', () => tracker.streamClosed());
}

/**
 * Whether a client reset of a call with no answer yet counts as early: within the window after
 * the call arrived, and not in the last tenth of the call's own deadline (a client whose deadline
 * timer runs a moment ahead of the sidecar's is giving up on time, not attacking).
 */
export function isEarlyReset(arrivedAt: number, now: number, deadlineAt: number | undefined): boolean {
  const age = now - arrivedAt;
  if (age >= EARLY_RESET_WINDOW_MS) return false;
  return deadlineAt === undefined || age < 0.9 * (deadlineAt - arrivedAt);
}

/** Counts a client reset of a call that had no answer yet against its connection. */
export function noteEarlyReset(stream: object): void {
  (stream as { session?: Tracked }).session?.[TRACKER]?.earlyReset();
}

/** True when `stream`'s connection resets calls early (see DispatchBatch). */
export function resetsEarly(stream: object): boolean {
  return (stream as { session?: Tracked }).session?.[TRACKER]?.resetsEarly ?? false;
}
