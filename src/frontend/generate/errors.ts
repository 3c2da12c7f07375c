/**
 * Every way a frontend request can fail, as one typed error with a stable string `code`. Code
 * that fails throws a FrontendError; only src/frontend/http/error-table.ts turns a code into an
 * HTTP status and body, so the mapping lives in exactly one place (its table is keyed by these
 * codes, so a new code does not compile until it has a status).
 */
import type { OverloadDetails } from '../routing/contracts.js';

export type FrontendErrorCode =
  /** The request body is malformed or asks for something unsupported (n > 1, image parts). */
  | 'bad_request'
  | 'unsupported_media_type'
  | 'payload_too_large'
  /** No route for the method and path (Fastify answers a known path's other methods so too). */
  | 'no_route'
  /** The request's headers, or the whole request, did not arrive within the server's timeout. */
  | 'request_timeout'
  /** The request's headers are larger than node's HTTP parser accepts. */
  | 'headers_too_large'
  /** No known worker serves the model. */
  | 'unknown_model'
  /** No worker can take traffic (none known, or all unreachable / draining). */
  | 'unavailable'
  /** Every eligible worker is busy or refused: the overload status (529). */
  | 'overloaded'
  /** The request's tenant has --tenant-max-inflight requests in flight here: 429 ("you, slow down", not "the fleet is full"). */
  | 'tenant_capped'
  /** The worker failed the call (any gRPC failure but a deadline), or broke the protocol. */
  | 'worker_failed'
  /** The call's deadline passed. */
  | 'worker_timeout'
  /** The client went away first: nothing is answered (counted as 499). */
  | 'client_gone'
  /** A bug on our side. */
  | 'internal';

export interface FrontendErrorOptions {
  /** For 'overloaded': why every worker was refused. */
  readonly details?: OverloadDetails;
  /** For 'overloaded' after workers refused: the soonest any of them expects room (its retry pushback); for 'tenant_capped': the estimate of a slot freeing; in ms. */
  readonly retryAfterMs?: number | undefined;
  /** What went wrong underneath (a thrown error, a worker's gRPC status), for logs; never sent to clients. */
  readonly cause?: unknown;
}

export class FrontendError extends Error {
  override readonly name: string = 'FrontendError';
  /** For 'overloaded': why every worker was refused. */
  readonly details: OverloadDetails | undefined;
  /** For 'overloaded' after workers refused: the soonest a worker expects room, in ms. */
  readonly retryAfterMs: number | undefined;

  constructor(
    readonly code: FrontendErrorCode,
    message: string,
    options: FrontendErrorOptions = {},
  ) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.details = options.details;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** The client went away (socket closed, request aborted): nothing is answered. */
export class ClientGoneError extends FrontendError {
  override readonly name = 'ClientGoneError';

  constructor() {
    super('client_gone', 'client disconnected');
  }
}
