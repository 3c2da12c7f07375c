/**
 * The one table from FrontendError codes to HTTP answers (the OpenAI routes, and what Fastify
 * and node answer of their own on every route but /busy_threshold: framework-errors.ts), in Dynamo's
 * flat shape {message, type, code} (code = the status used, plus `details` for overloads), with
 * the same three fields repeated under `error`: OpenAI's SDKs read only `body.error`, and without
 * it an overload surfaces there as "529 status code (no body)".
 * Messages a worker or the router produced are not shown for an unknown model, 503 or 529: clients get the
 * fixed texts Dynamo uses, and never a worker's address. Fastify's own errors (schema, JSON,
 * media type, body size) are mapped to codes here too, so nothing else decides a status.
 */
import { CLIENT_CLOSED_STATUS } from '../frontend-metrics.js';
import { FrontendError, type FrontendErrorCode } from '../generate/errors.js';
import type { OverloadDetails } from '../routing/contracts.js';

export interface ErrorAnswerOptions {
  /** Status of overload rejections (529, or DYN_HTTP_OVERLOAD_STATUS_CODE). */
  readonly overloadStatus: number;
}

interface ErrorSpec {
  readonly status: (options: ErrorAnswerOptions) => number;
  readonly type: string;
  /** Fixed client message; undefined = the error's own message. */
  readonly message?: string;
}

const fixed = (status: number) => () => status;

export const ERROR_TABLE: Readonly<Record<FrontendErrorCode, ErrorSpec>> = Object.freeze({
  bad_request: { status: fixed(400), type: 'BadRequest' },
  unsupported_media_type: { status: fixed(415), type: 'UnsupportedMediaType' },
  payload_too_large: { status: fixed(413), type: 'PayloadTooLarge' },
  no_route: { status: fixed(404), type: 'Not Found' },
  request_timeout: { status: fixed(408), type: 'RequestTimeout' },
  headers_too_large: { status: fixed(431), type: 'RequestHeaderFieldsTooLarge' },
  unknown_model: { status: fixed(404), type: 'Not Found', message: 'Model not found' },
  unavailable: { status: fixed(503), type: 'Service Unavailable', message: 'Service temporarily unavailable' },
  overloaded: { status: (o) => o.overloadStatus, type: 'Overloaded', message: 'Service temporarily overloaded' },
  // OpenAI's own code for too many requests; the message names the cap, never another tenant.
  tenant_capped: { status: fixed(429), type: 'rate_limit_exceeded' },
  worker_failed: { status: fixed(502), type: 'Bad Gateway' },
  worker_timeout: { status: fixed(504), type: 'Gateway Timeout' },
  // Never sent (the client is gone); the status its request is counted under.
  client_gone: { status: fixed(CLIENT_CLOSED_STATUS), type: 'Client Closed Request' },
  internal: { status: fixed(500), type: 'Internal Server Error', message: 'Internal server error' },
});

export interface ErrorBody {
  readonly message: string;
  readonly type: string;
  readonly code: number;
  readonly details?: OverloadDetails;
  /** The same message, type and code, where OpenAI's SDKs look. */
  readonly error: { readonly message: string; readonly type: string; readonly code: number };
}

export interface ErrorAnswer {
  readonly status: number;
  readonly body: ErrorBody;
}

export function errorAnswer(error: FrontendError, options: ErrorAnswerOptions): ErrorAnswer {
  const spec = ERROR_TABLE[error.code];
  const status = spec.status(options);
  const fields = { message: spec.message ?? error.message, type: spec.type, code: status };
  const body: ErrorBody = error.details === undefined ? { ...fields, error: fields } : { ...fields, details: error.details, error: fields };
  return { status, body };
}

/** Any thrown value as a FrontendError: ours as they are, Fastify's by their status, the rest internal. */
export function toFrontendError(error: unknown): FrontendError {
  if (error instanceof FrontendError) return error;
  const e = error as { statusCode?: unknown; validation?: unknown; message?: unknown };
  const message = typeof e?.message === 'string' ? e.message : String(error);
  const cause = { cause: error };
  if (e?.validation !== undefined) return new FrontendError('bad_request', message, cause);
  const status = typeof e?.statusCode === 'number' ? e.statusCode : 500;
  if (status === 413) return new FrontendError('payload_too_large', message, cause);
  if (status === 415) return new FrontendError('unsupported_media_type', message, cause);
  if (status >= 400 && status < 500) return new FrontendError('bad_request', message, cause);
  return new FrontendError('internal', message, cause);
}
