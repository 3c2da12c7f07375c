// The one table from failure kinds to HTTP statuses and bodies, and how thrown values become kinds.
import { describe, expect, it } from 'vitest';
import { FrontendError } from '../../../../src/frontend/generate/errors.js';
import { errorAnswer, toFrontendError } from '../../../../src/frontend/http/error-table.js';
import { OVERLOAD_DETAILS } from '../../../support/frontend-fakes.js';

const options = { overloadStatus: 529 };

describe('the error table', () => {
  it('gives every kind its status, type and, for routing outcomes and bugs, a fixed message that hides the internal one', () => {
    const rows = (
      [
        'bad_request',
        'unsupported_media_type',
        'payload_too_large',
        'unknown_model',
        'unavailable',
        'overloaded',
        'worker_failed',
        'worker_timeout',
        'internal',
      ] as const
    ).map((kind) => [kind, errorAnswer(new FrontendError(kind, 'internal words'), options)] as const);
    expect(Object.fromEntries(rows.map(([kind, a]) => [kind, [a.status, a.body.type, a.body.message]]))).toEqual({
      bad_request: [400, 'BadRequest', 'internal words'],
      unsupported_media_type: [415, 'UnsupportedMediaType', 'internal words'],
      payload_too_large: [413, 'PayloadTooLarge', 'internal words'],
      unknown_model: [404, 'Not Found', 'Model not found'],
      unavailable: [503, 'Service Unavailable', 'Service temporarily unavailable'],
      overloaded: [529, 'Overloaded', 'Service temporarily overloaded'],
      worker_failed: [502, 'Bad Gateway', 'internal words'],
      worker_timeout: [504, 'Gateway Timeout', 'internal words'],
      internal: [500, 'Internal Server Error', 'Internal server error'],
    });
    expect(rows.every(([, a]) => a.body.code === a.status)).toBe(true);
  });

  it('carries the overload details and the configured overload status', () => {
    expect(errorAnswer(new FrontendError('overloaded', 'x', OVERLOAD_DETAILS), { overloadStatus: 503 })).toEqual({
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
    expect(toFrontendError(fastifyError(413)).kind).toBe('payload_too_large');
    expect(toFrontendError(fastifyError(415)).kind).toBe('unsupported_media_type');
    expect(toFrontendError(fastifyError(400)).kind).toBe('bad_request');
    expect(toFrontendError(fastifyError(431)).kind).toBe('bad_request');
    expect(toFrontendError(Object.assign(new Error('body/x must be string'), { validation: [] })).kind).toBe('bad_request');
    expect(toFrontendError(new TypeError('oops')).kind).toBe('internal');
    expect(toFrontendError(fastifyError(503)).kind).toBe('internal');
  });
});
