/**
 * What a worker's gRPC status means to the frontend, decided here and nowhere else. The attempt
 * loop asks `refusalOf` for a call that ended before any output (a refusal is reported to the
 * router and the request goes to another worker); both it and the Generation ask
 * `workerFailure` for the error to answer when the call ended without a complete output.
 *
 *   OK (no complete message)           unfinished          502, no retry
 *   DEADLINE_EXCEEDED                  deadline            504
 *   INVALID_ARGUMENT                   request_rejected    400 (the engine's words, no addresses)
 *   RESOURCE_EXHAUSTED "message larger
 *     than max"                        message_too_large   413
 *   RESOURCE_EXHAUSTED (any other)     worker_busy         before output: refusal 'overloaded'; after: 502
 *   UNAVAILABLE                        worker_unreachable  before output: refusal 'unreachable'; after: 502
 *   anything else                      worker_error        502
 */
import { GrpcStatus, statusName } from '../../protocol/grpc/status.js';
import type { WorkerRefusal } from '../frontend-metrics.js';
import { FrontendError, type FrontendErrorCode } from './errors.js';
import type { CallStatus } from './worker-clients.js';

export type WorkerStatusKind = 'unfinished' | 'deadline' | 'request_rejected' | 'message_too_large' | 'worker_busy' | 'worker_unreachable' | 'worker_error';

interface StatusMeaning {
  /** Before any output: the worker refused (its own load or reachability), so another worker may take the request. */
  readonly refusal: WorkerRefusal | undefined;
  /** The request's failure when the call is not retried (or output already started). */
  readonly code: FrontendErrorCode;
  /** The client's message; never the worker's address. */
  readonly message: (status: CallStatus, address: string) => string;
}

const failed = (status: CallStatus): string => `the worker failed the request (${statusName(status.code)})`;

export const WORKER_STATUS: Readonly<Record<WorkerStatusKind, StatusMeaning>> = Object.freeze({
  unfinished: { refusal: undefined, code: 'worker_failed', message: () => 'the worker ended the call without finishing the output' },
  deadline: { refusal: undefined, code: 'worker_timeout', message: () => 'the worker did not finish before the request deadline' },
  // The engine's own words about the request (prompt too long, ...): the client's to fix, not a 502 to retry.
  request_rejected: {
    refusal: undefined,
    code: 'bad_request',
    message: (status, address) => `the worker rejected the request: ${withoutAddresses(status.details, address).slice(0, 300)}`,
  },
  message_too_large: {
    refusal: undefined,
    code: 'payload_too_large',
    message: () => 'the request is too large for the worker (over its gRPC message size limit): shorten the prompt',
  },
  worker_busy: { refusal: 'overloaded', code: 'worker_failed', message: failed },
  worker_unreachable: { refusal: 'unreachable', code: 'worker_failed', message: failed },
  worker_error: { refusal: undefined, code: 'worker_failed', message: failed },
});

export function workerStatusKind(status: CallStatus): WorkerStatusKind {
  switch (status.code) {
    case GrpcStatus.OK:
      return 'unfinished';
    case GrpcStatus.DEADLINE_EXCEEDED:
      return 'deadline';
    case GrpcStatus.INVALID_ARGUMENT:
      return 'request_rejected';
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return isMessageTooLarge(status.details) ? 'message_too_large' : 'worker_busy';
    case GrpcStatus.UNAVAILABLE:
      return 'worker_unreachable';
    default:
      return 'worker_error';
  }
}

/** A call that ended before any output: the refusal to report and retry past, or undefined (the request's own failure). */
export function refusalOf(status: CallStatus): WorkerRefusal | undefined {
  return WORKER_STATUS[workerStatusKind(status)].refusal;
}

/** The call ended without a complete output and is not retried: what to tell the client (the status is kept as the cause). */
export function workerFailure(status: CallStatus, address: string): FrontendError {
  const meaning = WORKER_STATUS[workerStatusKind(status)];
  return new FrontendError(meaning.code, meaning.message(status, address), { cause: status });
}

/**
 * gRPC's own size limit (4 MiB by default on every server), reported by grpc-js and gRPC core
 * alike as RESOURCE_EXHAUSTED "Received message larger than max (N vs. M)" (or "Sent ..." on
 * the client side). Same code as an admission refusal, but the request's fault, not the
 * worker's load: treating it as overload would mark every worker busy for one client's prompt.
 */
function isMessageTooLarge(details: string): boolean {
  return /message larger than max/iu.test(details);
}

/** `text` with the worker's address and anything like an IPv4 address or host:port replaced. */
function withoutAddresses(text: string, address: string): string {
  return text
    .replaceAll(address, '<worker>')
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/gu, '<worker>')
    .replace(/\[[0-9a-f:]+\](?::\d+)?/giu, '<worker>');
}

/** A refusal's `grpc-retry-pushback-ms`: when its worker expects room, in ms; undefined when absent or not a whole number >= 0. */
export function pushbackMsOf(status: CallStatus): number | undefined {
  const value = status.metadata?.get('grpc-retry-pushback-ms')[0];
  const text = typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('latin1') : undefined;
  return text !== undefined && /^\d{1,10}$/.test(text) ? Number(text) : undefined;
}
