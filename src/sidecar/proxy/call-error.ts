/**
 * Why the sidecar itself ended a call, and the one table that maps each reason to a gRPC status.
 * Statuses the engine sends pass through untouched; these are only the sidecar's own answers.
 */
import type { OutgoingHttpHeaders } from 'node:http2';
import { trailersOnlyHeaders } from '../../protocol/grpc/respond.js';
import { GrpcStatus } from '../../protocol/grpc/status.js';

const STATUS_OF_KIND = {
  /** Engine slots and overflow queue full (the spec's choice of status, not linkerd's UNAVAILABLE). */
  worker_at_capacity: GrpcStatus.RESOURCE_EXHAUSTED,
  /** The call's own deadline passed, in the queue or in the engine. */
  deadline_exceeded: GrpcStatus.DEADLINE_EXCEEDED,
  /** No HTTP/2 connection to the engine could be made or used. */
  upstream_unavailable: GrpcStatus.UNAVAILABLE,
  /** The engine's connection went away while the call was in it. */
  upstream_lost: GrpcStatus.UNAVAILABLE,
  /** SIGTERM received: the sidecar admits nothing new. */
  draining: GrpcStatus.UNAVAILABLE,
  /** The drain grace period ended with the call still running: retryable elsewhere, like a lost engine. */
  shutting_down: GrpcStatus.UNAVAILABLE,
  /** The client sent something the sidecar cannot forward (bad grpc-timeout, not gRPC, bad header). */
  invalid_request: GrpcStatus.INVALID_ARGUMENT,
} as const satisfies Record<string, GrpcStatus>;

export type CallErrorKind = keyof typeof STATUS_OF_KIND;

export const WORKER_AT_CAPACITY_MESSAGE = 'Server overloaded: worker at capacity';
export const DEADLINE_BEFORE_ENGINE = 'Deadline exceeded before the call reached the engine';
export const SHUTDOWN_MESSAGE = 'worker shutting down: call cut at the end of the drain grace period';

const OVERLOAD_HEADERS = Object.freeze(trailersOnlyHeaders(STATUS_OF_KIND.worker_at_capacity, WORKER_AT_CAPACITY_MESSAGE));

/**
 * The Trailers-Only RESOURCE_EXHAUSTED answer with its retry hint. Rejections are the one
 * answer sent thousands of times a second under overload, so it is built without constructing an
 * Error (and its stack trace) per rejected call, and the last one is kept: with a fixed pushback
 * every refusal reuses one frozen object.
 */
export function overloadResponse(retryPushbackMs: number): OutgoingHttpHeaders {
  if (retryPushbackMs !== lastOverload.ms) lastOverload = { ms: retryPushbackMs, headers: buildOverloadResponse(retryPushbackMs) };
  return lastOverload.headers;
}

function buildOverloadResponse(retryPushbackMs: number): OutgoingHttpHeaders {
  return Object.freeze({ ...OVERLOAD_HEADERS, 'grpc-retry-pushback-ms': String(retryPushbackMs) });
}

let lastOverload = { ms: NaN, headers: OVERLOAD_HEADERS as OutgoingHttpHeaders };

export class CallError extends Error {
  override readonly name = 'CallError';

  constructor(
    readonly kind: CallErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get status(): GrpcStatus {
    return STATUS_OF_KIND[this.kind];
  }
}
