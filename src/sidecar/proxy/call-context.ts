/**
 * What every proxied call depends on, as small interfaces: the admission gate, the engine
 * connection, metrics, a clock, and the optional observer that load accounting hooks into.
 * Built once by the sidecar; unit tests give a ProxiedCall fakes of each (fake streams, fake clock).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { AdmissionGate } from '../admission/gate.js';
import type { SloVerdict } from '../admission/slo-admission.js';
import type { CallClass } from '../admission/waiting-room.js';
import type { Logger } from '../../platform/log.js';
import type { RejectionReason, SidecarMetrics } from '../metrics/sidecar-metrics.js';
import type { RawHeaders } from './request-headers.js';

/** Sees the raw bytes of one dispatched call; must be cheap and must not throw. */
export interface TrafficTap {
  request(chunk: Buffer): void;
  response(chunk: Buffer): void;
  /** Exactly once, when the call leaves the engine for any reason. */
  end(): void;
}

export interface CallObserver {
  /** A call of `callClass` was refused with RESOURCE_EXHAUSTED (worker full, expected wait too long, queued past the queue timeout, or displaced). */
  rejected(reason: RejectionReason, callClass: CallClass): void;
  /** A call got an engine slot; return a tap to watch its bytes, or undefined (the common case). */
  dispatched(headers: IncomingHttpHeaders): TrafficTap | undefined;
  /** A call gave its engine slot back after holding it `heldMs` (the adaptive retry pushback's input). */
  slotReleased?(heldMs: number): void;
  /** The engine's first message for a call came `afterMs` after it took its slot (the expected-wait estimate's input). */
  firstToken?(afterMs: number): void;
}

/** What a call needs of any HTTP/2 stream: listeners, flow control and its closing state. */
interface CallStream {
  /** The events a call listens to, with node's listener arguments ('response', 'trailers': the engine's side; 'wantTrailers': the client's). */
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'end' | 'close' | 'aborted' | 'drain' | 'wantTrailers', listener: () => void): unknown;
  on(event: 'response', listener: (headers: IncomingHttpHeaders, flags: number) => void): unknown;
  on(event: 'trailers', listener: (trailers: IncomingHttpHeaders) => void): unknown;
  write(chunk: Buffer): boolean;
  end(): unknown;
  close(code?: number): void;
  pause(): unknown;
  resume(): unknown;
  readonly destroyed: boolean;
  readonly closed: boolean;
  readonly writableEnded: boolean;
}

/** The client's side of a call: the parts of node's ServerHttp2Stream a ProxiedCall uses. */
export interface DownstreamStream extends CallStream {
  respond(headers: OutgoingHttpHeaders, options: { endStream?: boolean; waitForTrailers?: boolean }): void;
  sendTrailers(trailers: OutgoingHttpHeaders): void;
  destroy(): unknown;
  readonly headersSent: boolean;
}

/** The engine's side of a call: the parts of node's ClientHttp2Stream a ProxiedCall uses. */
export interface UpstreamStream extends CallStream {
  readonly rstCode: number | undefined;
  readonly session: unknown;
}

/** Opens streams to the engine (UpstreamPool in production). */
export interface UpstreamConnector {
  /** Throws when no stream can be opened (session gone, or the headers are not sendable). */
  request(headers: OutgoingHttpHeaders | RawHeaders): UpstreamStream;
  /** The engine is known unreachable: new calls are answered UNAVAILABLE at once. */
  readonly down: boolean;
  /** False for a session whose connection never came up: tells "unreachable" from "lost". */
  wasConnected(session: unknown): boolean;
}

/** Monotonic milliseconds and one-shot timers; a fake in unit tests. */
export interface CallClock {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export type CallMetrics = Pick<
  SidecarMetrics,
  'rejected' | 'classAdmitted' | 'admittedFromQueue' | 'cancelledWhileQueued' | 'deadlineWhileQueued' | 'upstreamError' | 'callEnded'
>;

/** A call waiting for its dispatch turn. */
export interface DispatchTurn {
  onDispatchTurn(): void;
}

/**
 * Admission by work (--ttft-slo-ms): which calls are read before admission (request-peek.ts), what
 * each costs, and the decision on it (slo-admission.ts).
 */
export interface CallWork {
  /** Whether calls on this path are admitted by their work (the engine's Generate RPCs). */
  wants(path: string | undefined): boolean;
  /** The cost of a call with these headers and first request message (undefined: none could be read). */
  costOf(headers: IncomingHttpHeaders, firstMessage: Uint8Array | undefined): unknown;
  judge(cost: unknown, deadlineLeftMs: number | undefined): SloVerdict;
  /** Bounds of the peek. */
  readonly maxMessageBytes: number;
  readonly peekTimeoutMs: number;
}

export interface CallContext {
  readonly gate: Pick<AdmissionGate, 'acquire' | 'hasRoomFor'>;
  readonly upstream: UpstreamConnector;
  readonly metrics: CallMetrics;
  /** The retry pushback (ms) for one refusal, asked once per refusal: fixed, or adaptive (admission decides; the proxy builds the answer). */
  retryPushbackMs(): number;
  /**
   * For a call of `callClass` that would queue: its expected wait (ms) when it should be refused
   * at once instead (--max-queue-wait-ms), else undefined. Unset: every call may queue.
   */
  queueRefusalMs?(deadlineLeftMs: number | undefined, callClass: CallClass): number | undefined;
  /** A call queued longer than this is refused with RESOURCE_EXHAUSTED; read when it queues. 0 or unset: none. */
  readonly queueTimeoutMs?: number;
  readonly clock: CallClock;
  /**
   * Runs `call.onDispatchTurn()`, at once or, for a client connection that resets calls early,
   * once the current I/O read has been processed (DispatchBatch), so that resets arriving in the
   * same read are seen first.
   */
  readonly scheduleDispatch: (call: DispatchTurn, stream: DownstreamStream) => void;
  /** For what a client must not see (engine addresses, internal errors). */
  readonly logger: Logger;
  readonly observer?: CallObserver;
  /** Set with --ttft-slo-ms. */
  readonly work?: CallWork;
}
