/**
 * The sidecar's own gRPC answers: a status as trailers (grpc-message percent-encoded, left out
 * when empty), a Trailers-Only response (:status 200 and the status in one HEADERS frame with
 * END_STREAM), and respondTrailersOnly refusing a stream that can no longer take headers.
 */
import type { ServerHttp2Stream } from 'node:http2';
import { describe, expect, it, vi } from 'vitest';
import { respondTrailersOnly, statusTrailers, trailersOnlyHeaders } from '../../../../src/protocol/grpc/respond.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';

/** The part of a ServerHttp2Stream respondTrailersOnly reads and calls. */
function fakeStream(state: Partial<Pick<ServerHttp2Stream, 'headersSent' | 'destroyed' | 'closed'>> = {}) {
  const stream = { headersSent: false, destroyed: false, closed: false, ...state, respond: vi.fn(), resume: vi.fn() };
  return { stream, asStream: stream as unknown as ServerHttp2Stream };
}

describe('statusTrailers', () => {
  it('carries the status as a decimal string and the message as written when it is plain ASCII', () => {
    expect(statusTrailers(GrpcStatus.RESOURCE_EXHAUSTED, 'worker at capacity')).toEqual({ 'grpc-status': '8', 'grpc-message': 'worker at capacity' });
    expect(statusTrailers(GrpcStatus.UNAUTHENTICATED, 'x')['grpc-status']).toBe('16');
  });

  it('leaves grpc-message out for an empty message (OK needs none)', () => {
    const trailers = statusTrailers(GrpcStatus.OK, '');
    expect(trailers).toEqual({ 'grpc-status': '0' });
    expect('grpc-message' in trailers).toBe(false);
  });

  it("percent-encodes '%', control characters and non-ASCII as the gRPC spec requires", () => {
    expect(statusTrailers(GrpcStatus.INTERNAL, '100% busy\nnaïve')['grpc-message']).toBe('100%25 busy%0Ana%C3%AFve');
  });

  it('keeps extra headers, lets the status given win over one in them, and does not change them', () => {
    const extra = Object.freeze({ 'retry-after-ms': '250', 'grpc-status': '0' });
    expect(statusTrailers(GrpcStatus.UNAVAILABLE, 'draining', extra)).toEqual({ 'retry-after-ms': '250', 'grpc-status': '14', 'grpc-message': 'draining' });
    expect(extra).toEqual({ 'retry-after-ms': '250', 'grpc-status': '0' });
  });
});

describe('trailersOnlyHeaders', () => {
  it('puts :status 200, the gRPC content type and the status in one header block', () => {
    expect(trailersOnlyHeaders(GrpcStatus.RESOURCE_EXHAUSTED, 'queue full')).toEqual({
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-status': '8',
      'grpc-message': 'queue full',
    });
  });

  it('encodes the message and carries extra headers like statusTrailers', () => {
    expect(trailersOnlyHeaders(GrpcStatus.UNIMPLEMENTED, 'no méthod', { 'x-extra': 'y' })).toEqual({
      ':status': 200,
      'content-type': 'application/grpc',
      'x-extra': 'y',
      'grpc-status': '12',
      'grpc-message': 'no m%C3%A9thod',
    });
    expect(trailersOnlyHeaders(GrpcStatus.OK, '')).not.toHaveProperty('grpc-message');
  });
});

describe('respondTrailersOnly', () => {
  it('responds with the headers and END_STREAM, then drains the request body, and says so', () => {
    const { stream, asStream } = fakeStream();
    const headers = trailersOnlyHeaders(GrpcStatus.INVALID_ARGUMENT, 'bad request');
    expect(respondTrailersOnly(asStream, headers)).toBe(true);
    expect(stream.respond).toHaveBeenCalledTimes(1);
    expect(stream.respond).toHaveBeenCalledWith(headers, { endStream: true });
    expect(stream.resume).toHaveBeenCalledTimes(1);
  });

  it.each([['headersSent'], ['destroyed'], ['closed']] as const)('does nothing and returns false when the stream is %s', (state) => {
    const { stream, asStream } = fakeStream({ [state]: true });
    expect(respondTrailersOnly(asStream, trailersOnlyHeaders(GrpcStatus.INTERNAL, 'late'))).toBe(false);
    expect(stream.respond).not.toHaveBeenCalled();
    expect(stream.resume).not.toHaveBeenCalled();
  });
});
