// The one table from error codes to HTTP statuses and bodies, and how thrown values become codes.
import { describe, expect, it } from 'vitest';
import { FrontendError } from '../../../../src/frontend/generate/errors.js';
import { errorAnswer, toFrontendError } from '../../../../src/frontend/http/error-table.js';
import { OVERLOAD_DETAILS } from '../../../support/frontend-fakes.js';

const options = { overloadStatus: 529 };

describe('the error table', () => {
  it('gives every code its status, type and, for routing outcomes and bugs, a fixed message that hides the internal one', () => {
    const rows = (
      [
        'bad_request',
        'unsupported_media_type',
        'payload_too_large',
        'no_route',
        'request_timeout',
        'headers_too_large',
        'unknown_model',
        'unavailable',
        'overloaded',
        'worker_failed',
        'worker_timeout',
        'client_gone',
        'internal',
      ] as const
    ).map((kind) => [kind, errorAnswer(new FrontendError(kind, 'internal words'), options)] as const);
    expect(Object.fromEntries(rows.map(([kind, a]) => [kind, [a.status, a.body.type, a.body.message]]))).toEqual({
      bad_request: [400, 'BadRequest', 'internal words'],
      unsupported_media_type: [415, 'UnsupportedMediaType', 'internal words'],
      payload_too_large: [413, 'PayloadTooLarge', 'internal words'],
      no_route: [404, 'Not Found', 'internal words'],
      request_timeout: [408, 'RequestTimeout', 'internal words'],
      headers_too_large: [431, 'RequestHeaderFieldsTooLarge', 'internal words'],
      unknown_model: [404, 'Not Found', 'Model not found'],
      unavailable: [503, 'Service Unavailable', 'Service temporarily unavailable'],
      overloaded: [529, 'Overloaded', 'Service temporarily overloaded'],
      worker_failed: [502, 'Bad Gateway', 'internal words'],
      worker_timeout: [504, 'Gateway Timeout', 'internal words'],
      client_gone: [499, 'Client Closed Request', 'internal words'],
      internal: [500, 'Internal Server Error', 'Internal server error'],
    });
    expect(rows.every(([, a]) => a.body.code === a.status)).toBe(true);
  });

  it('carries the overload details and the configured overload status', () => {
    expect(errorAnswer(new FrontendError('overloaded', 'x', { details: OVERLOAD_DETAILS }), { overloadStatus: 503 })).toEqual({
      status: 503,
      body: {
        message: 'Service temporarily overloaded',
        type: 'Overloaded',
        code: 503,
        details: OVERLOAD_DETAILS,
        error: { message: 'Service temporarily overloaded', type: 'Overloaded', code: 503 },
      },
    });
  });

  it("maps Fastify's own errors by status: 413, 415, any other 4xx as a bad request, the rest as internal", () => {
    const fastifyError = (statusCode: number) => Object.assign(new Error(`status ${statusCode}`), { statusCode });
    expect(toFrontendError(fastifyError(413)).code).toBe('payload_too_large');
    expect(toFrontendError(fastifyError(415)).code).toBe('unsupported_media_type');
    expect(toFrontendError(fastifyError(400)).code).toBe('bad_request');
    expect(toFrontendError(fastifyError(431)).code).toBe('bad_request');
    expect(toFrontendError(Object.assign(new Error('body/x must be string'), { validation: [] })).code).toBe('bad_request');
    expect(toFrontendError(new TypeError('oops')).code).toBe('internal');
    expect(toFrontendError(fastifyError(503)).code).toBe('internal');
  });

  it('keeps the thrown value as the cause, so logs can show what Fastify reported', () => {
    const thrown = Object.assign(new Error('body too large'), { statusCode: 413 });
    expect(toFrontendError(thrown).cause).toBe(thrown);
    const ours = new FrontendError('bad_request', 'x');
    expect(toFrontendError(ours)).toBe(ours);
  });
});
