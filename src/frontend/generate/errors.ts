/**
 * Every way a frontend request can fail, as one typed error with a `kind`. Code that fails
 * throws a FrontendError; only src/frontend/http/error-table.ts turns a kind into an HTTP
 * status and body, so the mapping lives in exactly one place.
 */
import type { OverloadDetails } from '../routing/contracts.js';

export type FrontendErrorKind =
  /** The request body is malformed or asks for something unsupported (n > 1, image parts). */
  | 'bad_request'
  | 'unsupported_media_type'
  | 'payload_too_large'
  /** No known worker serves the model. */
  | 'unknown_model'
  /** No worker can take traffic (none known, or all unreachable / draining). */
  | 'unavailable'
  /** Every eligible worker is busy or refused: the overload status (529). */
  | 'overloaded'
  /** The worker failed the call (any gRPC failure but a deadline), or broke the protocol. */
  | 'worker_failed'
  /** The call's deadline passed. */
  | 'worker_timeout'
  /** A bug on our side. */
  | 'internal';

export class FrontendError extends Error {
  constructor(
    readonly kind: FrontendErrorKind,
    message: string,
    /** For 'overloaded': why every worker was refused. */
    readonly details?: OverloadDetails,
  ) {
    super(message);
    this.name = 'FrontendError';
  }
}

/** The client went away (socket closed, request aborted): nothing is answered. */
export class ClientGoneError extends Error {
  constructor() {
    super('client disconnected');
    this.name = 'ClientGoneError';
  }
}
