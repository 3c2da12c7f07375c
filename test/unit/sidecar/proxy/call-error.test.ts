/** call-error: the sidecar's own reasons map to one status each, and the overload answer is built once per pushback value. */
import { describe, expect, it } from 'vitest';
import { CallError, overloadResponse, WORKER_AT_CAPACITY_MESSAGE } from '../../../../src/sidecar/proxy/call-error.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';

describe('CallError', () => {
  it.each([
    ['worker_at_capacity', GrpcStatus.RESOURCE_EXHAUSTED],
    ['deadline_exceeded', GrpcStatus.DEADLINE_EXCEEDED],
    ['upstream_unavailable', GrpcStatus.UNAVAILABLE],
    ['upstream_lost', GrpcStatus.UNAVAILABLE],
    ['draining', GrpcStatus.UNAVAILABLE],
    ['shutting_down', GrpcStatus.UNAVAILABLE],
    ['invalid_request', GrpcStatus.INVALID_ARGUMENT],
  ] as const)('%s is %i', (kind, status) => {
    const error = new CallError(kind, 'why', { cause: new Error('inner') });
    expect([error.status, error.name, error.message, (error.cause as Error).message]).toEqual([status, 'CallError', 'why', 'inner']);
  });
});

describe('overloadResponse', () => {
  it('is the Trailers-Only RESOURCE_EXHAUSTED answer with the pushback hint', () => {
    const headers = overloadResponse(250);
    expect(headers[':status']).toBe(200);
    expect(headers['content-type']).toBe('application/grpc');
    expect(headers['grpc-status']).toBe(String(GrpcStatus.RESOURCE_EXHAUSTED));
    expect(headers['grpc-message']).toBe(WORKER_AT_CAPACITY_MESSAGE);
    expect(headers['grpc-retry-pushback-ms']).toBe('250');
    expect(Object.isFrozen(headers)).toBe(true);
  });

  it('reuses one object while the pushback stays the same (the fixed mode builds nothing per refusal), and a new one when it changes', () => {
    const first = overloadResponse(40);
    expect(overloadResponse(40)).toBe(first);
    const other = overloadResponse(41);
    expect(other).not.toBe(first);
    expect(other['grpc-retry-pushback-ms']).toBe('41');
    expect(first['grpc-retry-pushback-ms']).toBe('40');
  });
});
