/**
 * Per-connection limits on the gRPC ingress, so connections that do no work cannot pile up:
 *   handshake  the client's HTTP/2 preface and SETTINGS must arrive within `handshakeTimeoutMs`
 *              of the TCP connection, or the connection is destroyed (a socket that says nothing).
 *   idle       a connection with no open stream for `idleTimeoutMs` gets GOAWAY and is closed.
 *              Idle means no complete request, not no bytes: a client dripping one CONTINUATION
 *              frame at a time (slowloris) has no open stream and is closed like a silent one.
 * The number of streams per connection is bounded by SETTINGS_MAX_CONCURRENT_STREAMS, which the
 * server advertises (node refuses streams beyond it with RST_STREAM(REFUSED_STREAM)).
 */
import type { Http2Session, ServerHttp2Stream } from 'node:http2';

export interface ConnectionLimitOptions {
  /** 0 = never close idle connections. */
  readonly idleTimeoutMs: number;
  readonly handshakeTimeoutMs: number;
}

/** How long a closing idle connection may take to finish before it is destroyed. */
const CLOSE_GRACE_MS = 1000;

const TRACKER = Symbol('dynamo-sidecar.connection');

class ConnectionTracker {
  openStreams = 0;
  private idleSince: number;
  private idleTimer: NodeJS.Timeout | undefined;
  private handshakeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly session: Http2Session,
    private readonly options: ConnectionLimitOptions,
  ) {
    this.idleSince = Date.now();
    this.handshakeTimer = setTimeout(() => this.onHandshakeTimeout(), options.handshakeTimeoutMs);
    this.handshakeTimer.unref();
    session.once('remoteSettings', () => this.onHandshakeDone());
    session.once('close', () => this.stop());
  }

  streamOpened(): void {
    this.openStreams++;
  }

  streamClosed(): void {
    if (--this.openStreams === 0) this.idleSince = Date.now();
  }

  private onHandshakeDone(): void {
    clearTimeout(this.handshakeTimer);
    this.handshakeTimer = undefined;
    const idleMs = this.options.idleTimeoutMs;
    if (idleMs > 0) {
      this.idleSince = Date.now();
      this.idleTimer = setTimeout(() => this.onIdleCheck(), idleMs);
      this.idleTimer.unref();
    }
  }

  private onHandshakeTimeout(): void {
    this.handshakeTimer = undefined;
    this.session.destroy();
  }

  /** One timer per connection, re-armed for the rest of the idle period instead of per stream. */
  private onIdleCheck(): void {
    const idleMs = this.options.idleTimeoutMs;
    const idleFor = Date.now() - this.idleSince;
    if (this.openStreams > 0 || idleFor < idleMs) {
      this.idleTimer = setTimeout(() => this.onIdleCheck(), this.openStreams > 0 ? idleMs : idleMs - idleFor);
      this.idleTimer.unref();
      return;
    }
    this.idleTimer = undefined;
    const session = this.session;
    session.close(); // GOAWAY; with no open stream it closes at once
    setTimeout(() => session.destroy(), CLOSE_GRACE_MS).unref();
  }

  private stop(): void {
    clearTimeout(this.handshakeTimer);
    clearTimeout(this.idleTimer);
  }
}

type Tracked = Http2Session & { [TRACKER]?: ConnectionTracker };

/** Starts the handshake and idle clocks of a new client connection. */
export function limitConnection(session: Http2Session, options: ConnectionLimitOptions): void {
  (session as Tracked)[TRACKER] = new ConnectionTracker(session, options);
}

/** Counts `stream` as open on its connection until it closes. */
export function trackStream(stream: ServerHttp2Stream): void {
  const tracker = (stream.session as Tracked | undefined)?.[TRACKER];
  if (!tracker) return;
  tracker.streamOpened();
  stream.once('close', onTrackedStreamClose);
}

function onTrackedStreamClose(this: ServerHttp2Stream): void {
  (this.session as Tracked | undefined)?.[TRACKER]?.streamClosed();
}
