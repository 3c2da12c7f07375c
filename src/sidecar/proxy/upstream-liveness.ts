/**
 * How one engine connection (UpstreamSession) learns that the engine still answers: first its
 * SETTINGS, then one probe at a time, `pingIntervalMs` after the previous answer. A probe
 * unanswered after `pingTimeoutMs` with no byte from the engine meanwhile marks the connection
 * unreachable (if it is the current one), its late answer reachable again, and `silentSessionMs`
 * of such silence destroys the connection.
 *
 * A probe is not simply a PING, because gRPC servers police PINGs. grpc-core's (grpcio, which
 * Python engines serve gRPC on) allows one per grpc.http2.min_ping_interval_without_data_ms (5
 * minutes) while calls are open, none without calls unless it permits keepalive without calls,
 * counts every earlier one as a strike until it next sends headers or data, and past
 * grpc.http2.max_ping_strikes (2) sends GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and closes the
 * connection, failing its calls. A PING a second thus lost an idle connection every 4 s, and
 * would cut calls during any silence longer than that (a long prefill).
 *
 * So PINGs follow gRPC's keepalive rules (gRFC A8), as Keepalive below: at most one per
 * `keepaliveIntervalMs` (by default grpc-core's own minimum), only while the connection carries
 * calls unless `keepaliveWithoutCalls`, and that interval doubles at each too_many_pings, as
 * grpc-core clients do. Every other probe is a call any gRPC server takes at any rate,
 * grpc.health.v1.Health/Check: any HTTP/2 answer to it (SERVING, NOT_FOUND, UNIMPLEMENTED, even a
 * stream reset) proves the engine reads and answers, and its headers reset the server's strikes.
 * The connection's state alone would not do: a frozen engine's kernel keeps its TCP up.
 */
import type { ClientHttp2Session, ClientHttp2Stream } from 'node:http2';
import { constants } from 'node:http2';
import { frameMessage } from '../../protocol/grpc/framing.js';
import { MAX_TIMER_MS } from '../../protocol/grpc/deadline.js';
import type { Logger } from '../../platform/log.js';

export const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';
const HEALTH_CHECK_HEADERS = Object.freeze({ ':method': 'POST', ':path': HEALTH_CHECK_PATH, 'content-type': 'application/grpc', te: 'trailers' });
/** An empty HealthCheckRequest (service "": the whole server). */
const HEALTH_CHECK_BODY = frameMessage(new Uint8Array(0));
/** The debug data grpc-core sends with its ENHANCE_YOUR_CALM GOAWAY when a client PINGs too often. */
const TOO_MANY_PINGS = 'too_many_pings';

/**
 * When a connection may PING (gRFC A8). One per UpstreamSession, kept across its reconnects, so an
 * engine that asked for fewer PINGs is not PINGed at the old rate by the next connection either.
 */
export class Keepalive {
  private interval: number;
  private lastPingAt = -Infinity;

  constructor(
    intervalMs: number,
    private readonly withoutCalls: boolean,
    private readonly now: () => number,
    private readonly logger: Logger,
    private readonly address: string,
  ) {
    this.interval = intervalMs;
  }

  get intervalMs(): number {
    return this.interval;
  }

  /** A PING may go now: calls are open (or PINGs without calls are allowed), and the last one is an interval old. */
  due(openCalls: number): boolean {
    return (openCalls > 0 || this.withoutCalls) && this.now() - this.lastPingAt >= this.interval;
  }

  sent(): void {
    this.lastPingAt = this.now();
  }

  /** A GOAWAY came: ENHANCE_YOUR_CALM with too_many_pings doubles the interval, and says so once. */
  goaway(errorCode: number, opaqueData: Buffer | undefined): void {
    if (errorCode !== constants.NGHTTP2_ENHANCE_YOUR_CALM || opaqueData?.toString('latin1') !== TOO_MANY_PINGS) return;
    const from = this.interval;
    this.interval = Math.min(MAX_TIMER_MS, from * 2);
    this.logger.warn('the engine refused our PINGs as too many (GOAWAY ENHANCE_YOUR_CALM too_many_pings): keepalive interval doubled', {
      upstream: this.address,
      fromMs: from,
      toMs: this.interval,
    });
  }
}

export interface LivenessTimings {
  readonly now: () => number;
  readonly pingIntervalMs: number;
  readonly pingTimeoutMs: number;
  readonly silentSessionMs: number;
}

/** What the probe tells its connection, and asks it. */
export interface LivenessHooks {
  /** This node session is still the connection's current one (only its changes are reported). */
  isCurrent(): boolean;
  reachable(logFields: Record<string, unknown> | undefined): void;
  unreachable(reason: string): void;
  /** The engine's SETTINGS came: the connection is up. */
  connected(): void;
  /** Why the session is being destroyed, for its 'close' log line. */
  closing(reason: string): void;
  /** Calls open on this session now (probes not counted). */
  openCalls(): number;
  /** Why no SETTINGS came in time (no TCP, no TLS handshake, no HTTP/2). */
  settingsReason(): string;
}

/** Probes `session` from now until it closes (see the top of this file). */
export function watchLiveness(session: ClientHttp2Session, timings: LivenessTimings, keepalive: Keepalive, hooks: LivenessHooks): void {
  const { now, pingIntervalMs, pingTimeoutMs, silentSessionMs } = timings;
  let probeSentAt = now();
  let overdue = false;
  let nextProbeTimer: NodeJS.Timeout | undefined;
  let check: ClientHttp2Stream | undefined;

  const received = (): number => session.socket?.bytesRead ?? 0;
  /**
   * Calls `onSilent` once `ms` pass with no byte from the engine. Bytes that arrive meanwhile
   * prove the engine runs and only its answer is slow (it is busy with a large message, say), so
   * the watch starts over instead of reading the engine unreachable or cutting its calls.
   * Returns its cancel.
   */
  const watchSilence = (ms: number, onSilent: () => void): (() => void) => {
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      const bytesBefore = received();
      timer = unrefTimer(
        setTimeout(() => {
          // Defer past the poll phase: if this process itself was stalled, an answer already in
          // the socket is read first instead of being mistaken for silence.
          setImmediate(() => {
            if (timer === undefined || session.destroyed) return;
            if (received() > bytesBefore) return arm();
            onSilent();
          });
        }, ms),
      );
    };
    arm();
    return () => {
      clearTimeout(timer);
      timer = undefined;
    };
  };
  let cancelOverdue = (): void => {};
  let cancelSilence = (): void => {};

  const startProbeTimers = (what: () => string): void => {
    probeSentAt = now();
    overdue = false;
    cancelOverdue = watchSilence(pingTimeoutMs, () => {
      overdue = true;
      if (hooks.isCurrent()) hooks.unreachable(what());
    });
    cancelSilence = watchSilence(silentSessionMs, () => {
      const reason = `the engine answered nothing for ${silentSessionMs} ms (${what()}); connection reopened`;
      hooks.closing(reason);
      if (hooks.isCurrent()) hooks.unreachable(reason);
      session.destroy();
    });
  };
  const stopProbeTimers = (): void => {
    cancelOverdue();
    cancelSilence();
  };
  const answered = (): void => {
    stopProbeTimers();
    if (hooks.isCurrent()) hooks.reachable(overdue ? { lateAnswerMs: Math.round(now() - probeSentAt) } : undefined);
    nextProbeTimer = unrefTimer(setTimeout(probe, pingIntervalMs));
  };
  const ping = (): void => {
    keepalive.sent();
    startProbeTimers(() => `engine did not answer PING within ${pingTimeoutMs} ms`);
    // An error here means the session is going away; its 'close' handler reports that.
    session.ping((err) => {
      if (!err) answered();
    });
  };
  const healthCheck = (): void => {
    // One check at a time: an engine that answered the last one's headers but never ended it does not collect them.
    if (check && !check.closed) check.close(constants.NGHTTP2_CANCEL);
    startProbeTimers(() => `engine did not answer ${HEALTH_CHECK_PATH} within ${pingTimeoutMs} ms`);
    const stream = (check = session.request(HEALTH_CHECK_HEADERS));
    let done = false;
    const answer = (): void => {
      if (done || check !== stream) return;
      done = true;
      answered();
    };
    stream.on('response', answer);
    // A reset from the engine (REFUSED_STREAM, say) is an answer too; our own cancel and a lost session are not.
    stream.on('close', () => {
      if (stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_CANCEL && !session.destroyed) answer();
    });
    stream.on('error', () => {});
    stream.resume();
    stream.end(HEALTH_CHECK_BODY);
  };
  const probe = (): void => {
    // node cannot PING or open a stream on a closed session (one draining after GOAWAY); its calls end on their own.
    if (session.destroyed || session.closed) return;
    if (keepalive.due(hooks.openCalls())) ping();
    else healthCheck();
  };

  startProbeTimers(() => hooks.settingsReason());
  session.once('remoteSettings', () => {
    hooks.connected();
    answered();
  });
  session.on('goaway', (errorCode: number, _lastStreamID: number, opaqueData?: Buffer) => keepalive.goaway(errorCode, opaqueData));
  session.once('close', () => {
    stopProbeTimers();
    clearTimeout(nextProbeTimer);
  });
}

function unrefTimer(timer: NodeJS.Timeout): NodeJS.Timeout {
  timer.unref();
  return timer;
}
