// The one table of what a worker's gRPC status means: retry elsewhere, or which error the client gets.
import { describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { FrontendError } from '../../../../src/frontend/generate/errors.js';
import { pushbackMsOf, refusalOf, workerFailure, workerStatusKind } from '../../../../src/frontend/generate/worker-status.js';

const status = (code: GrpcStatus, details = 'whatever') => ({ code, details });
const TOO_LARGE = status(GrpcStatus.RESOURCE_EXHAUSTED, 'Received message larger than max (5000000 vs. 4194304)');

describe('worker status classification', () => {
  it('classifies each status the frontend treats differently, and every other code as a worker error', () => {
    expect(workerStatusKind(status(GrpcStatus.OK))).toBe('unfinished');
    expect(workerStatusKind(status(GrpcStatus.DEADLINE_EXCEEDED))).toBe('deadline');
    expect(workerStatusKind(status(GrpcStatus.INVALID_ARGUMENT))).toBe('request_rejected');
    expect(workerStatusKind(status(GrpcStatus.RESOURCE_EXHAUSTED, 'admission queue full'))).toBe('worker_busy');
    expect(workerStatusKind(TOO_LARGE)).toBe('message_too_large');
    expect(workerStatusKind(status(GrpcStatus.UNAVAILABLE))).toBe('worker_unreachable');
    for (const code of [GrpcStatus.CANCELLED, GrpcStatus.UNKNOWN, GrpcStatus.INTERNAL, GrpcStatus.UNIMPLEMENTED, GrpcStatus.DATA_LOSS]) {
      expect(workerStatusKind(status(code))).toBe('worker_error');
    }
  });

  it('makes only a busy or unreachable worker a refusal to retry past; a too-large message is the request, not the load', () => {
    expect(refusalOf(status(GrpcStatus.RESOURCE_EXHAUSTED, 'queue full'))).toBe('overloaded');
    expect(refusalOf(status(GrpcStatus.UNAVAILABLE))).toBe('unreachable');
    expect(refusalOf(TOO_LARGE)).toBeUndefined();
    for (const code of [GrpcStatus.OK, GrpcStatus.INVALID_ARGUMENT, GrpcStatus.DEADLINE_EXCEEDED, GrpcStatus.INTERNAL, GrpcStatus.CANCELLED]) {
      expect(refusalOf(status(code))).toBeUndefined();
    }
  });
});

describe('workerFailure', () => {
  const failure = (s: { code: GrpcStatus; details: string }) => {
    const error = workerFailure(s, '10.0.0.1:9000');
    return [error.code, error.message];
  };

  it('gives each status its error code and client message', () => {
    expect(failure(status(GrpcStatus.OK))).toEqual(['worker_failed', 'the worker ended the call without finishing the output']);
    expect(failure(status(GrpcStatus.DEADLINE_EXCEEDED))).toEqual(['worker_timeout', 'the worker did not finish before the request deadline']);
    expect(failure(TOO_LARGE)).toEqual(['payload_too_large', 'the request is too large for the worker (over its gRPC message size limit): shorten the prompt']);
    expect(failure(status(GrpcStatus.INVALID_ARGUMENT, 'prompt too long'))).toEqual(['bad_request', 'the worker rejected the request: prompt too long']);
    // After output started a refusal is no longer retried: it is the worker failing the request.
    expect(failure(status(GrpcStatus.RESOURCE_EXHAUSTED, 'queue full'))).toEqual(['worker_failed', 'the worker failed the request (RESOURCE_EXHAUSTED)']);
    expect(failure(status(GrpcStatus.UNAVAILABLE))).toEqual(['worker_failed', 'the worker failed the request (UNAVAILABLE)']);
    expect(failure(status(GrpcStatus.INTERNAL))).toEqual(['worker_failed', 'the worker failed the request (INTERNAL)']);
    expect(failure(status(99 as GrpcStatus))).toEqual(['worker_failed', 'the worker failed the request (99)']);
  });

  it("never repeats an address from the engine's words, and cuts them at 300 characters", () => {
    const details = `bad prompt from 10.0.0.1:9000 via 192.168.1.2:50051 and [fd00::1]:80 ${'x'.repeat(400)}`;
    const { message } = workerFailure(status(GrpcStatus.INVALID_ARGUMENT, details), '10.0.0.1:9000');
    expect(message).toMatch(/^the worker rejected the request: bad prompt from <worker> via <worker> and <worker> x+$/u);
    expect(message.length).toBe('the worker rejected the request: '.length + 300);
  });

  it('keeps the status it came from as the cause', () => {
    const s = status(GrpcStatus.INTERNAL, 'engine crashed');
    const error = workerFailure(s, 'w:1');
    expect(error).toBeInstanceOf(FrontendError);
    expect(error.cause).toEqual(s);
  });
});

describe('pushbackMsOf', () => {
  const status = (value: unknown) => ({
    code: GrpcStatus.RESOURCE_EXHAUSTED,
    details: 'full',
    metadata: { get: (key: string) => (key === 'grpc-retry-pushback-ms' ? [value] : []) },
  });

  it('reads a whole number of ms, as a string or as bytes', () => {
    expect(pushbackMsOf(status('250'))).toBe(250);
    expect(pushbackMsOf(status(Buffer.from('0')))).toBe(0);
  });

  it('ignores anything else: absent trailers, a negative, a fraction, words, an absurd length', () => {
    expect(pushbackMsOf({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: 'full' })).toBeUndefined();
    for (const bad of ['-1', '2.5', 'soon', '', '12345678901', undefined]) expect(pushbackMsOf(status(bad)), String(bad)).toBeUndefined();
  });
});
