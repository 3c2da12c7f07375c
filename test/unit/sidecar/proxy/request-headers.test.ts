/** Connection-specific headers are dropped and `te` normalised before a request reaches the engine. */
import type { IncomingHttpHeaders } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { MAX_FORWARDED_TIMEOUT_MS, formatGrpcTimeout } from '../../../../src/protocol/grpc/deadline.js';
import {
  forwardableRawHeaders,
  isHeaderError,
  rawRequestHeadersSupported,
  stripConnectionHeaders,
  upstreamRequestHeaders,
} from '../../../../src/sidecar/proxy/request-headers.js';

describe('stripConnectionHeaders', () => {
  it('keeps an ordinary gRPC request as it is, without copying it', () => {
    const headers: IncomingHttpHeaders = { ':path': '/a.B/C', 'content-type': 'application/grpc', te: 'trailers', 'x-user': 'u' };
    const before = { ...headers };
    expect(stripConnectionHeaders(headers)).toBe(headers);
    expect(headers).toEqual(before);
  });

  it.each([
    ['Trailers', 'trailers'],
    ['TRAILERS', 'trailers'],
    [' trailers , deflate', 'trailers'],
    ['gzip', undefined],
    ['', undefined],
  ])('normalises te %j to %j', (te, expected) => {
    expect(stripConnectionHeaders({ te }).te).toBe(expected);
  });

  it('drops every connection-specific field HTTP/2 forbids', () => {
    const headers = stripConnectionHeaders({
      connection: 'keep-alive, upgrade',
      'http2-settings': 'AAMAAABkAAQAoAAAAAIAAAAA',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      'transfer-encoding': 'chunked',
      upgrade: 'h2c',
      'x-keep': 'me',
    });
    expect(headers).toEqual({ 'x-keep': 'me' });
  });
});

describe('forwardableRawHeaders', () => {
  const GRPC = [':method', 'POST', ':scheme', 'http', ':path', '/a.B/C', ':authority', 'w:1', 'content-type', 'application/grpc', 'te', 'trailers'];

  it('forwards an ordinary request list as it is, without copying it', () => {
    const raw = [...GRPC, 'x-user', 'u'];
    expect(forwardableRawHeaders(raw, undefined)).toBe(raw);
    expect(raw).toEqual([...GRPC, 'x-user', 'u']);
  });

  it("replaces every grpc-timeout value with the sidecar's, in place and in order", () => {
    const raw = [...GRPC, 'grpc-timeout', '99999999H', 'x-user', 'u'];
    expect(forwardableRawHeaders(raw, '1500m')).toEqual([...GRPC, 'grpc-timeout', '1500m', 'x-user', 'u']);
  });

  it('drops every connection-specific field and normalises te, like the object form', () => {
    const raw = [':path', '/a.B/C', 'connection', 'keep-alive', 'te', ' Trailers , deflate', 'http2-settings', 'AAMA', 'keep-alive', 'timeout=5'];
    raw.push('proxy-connection', 'keep-alive', 'transfer-encoding', 'chunked', 'upgrade', 'h2c', 'grpc-timeout', '1S', 'x-keep', 'me');
    expect(forwardableRawHeaders(raw, '900m')).toEqual([':path', '/a.B/C', 'te', 'trailers', 'grpc-timeout', '900m', 'x-keep', 'me']);
    expect(forwardableRawHeaders(['te', 'gzip', 'x', 'y'], undefined)).toEqual(['x', 'y']);
  });

  it('is used only on Nodes whose session.request() takes a raw list (22.17+, 24+)', () => {
    expect(['20.20.2', '22.16.0', '23.11.0'].map(rawRequestHeadersSupported)).toEqual([false, false, false]);
    expect(['22.17.0', '22.21.1', '24.0.0', '24.22.3', '26.1.0'].map(rawRequestHeadersSupported)).toEqual([true, true, true, true, true]);
  });
});

describe('isHeaderError', () => {
  it("tells node's header refusals from session failures", () => {
    expect(isHeaderError(Object.assign(new TypeError('forbidden'), { code: 'ERR_HTTP2_INVALID_CONNECTION_HEADERS' }))).toBe(true);
    expect(isHeaderError(Object.assign(new TypeError('bad char'), { code: 'ERR_INVALID_CHAR' }))).toBe(true);
    expect(isHeaderError(Object.assign(new Error('gone'), { code: 'ERR_HTTP2_INVALID_SESSION' }))).toBe(false);
    expect(isHeaderError(new Error('no code'))).toBe(false);
    expect(isHeaderError(undefined)).toBe(false);
  });
});

describe('upstreamRequestHeaders', () => {
  it('sets the time left of the deadline as grpc-timeout on the object form', () => {
    const headers = upstreamRequestHeaders({ ':path': '/a.B/C', connection: 'close', 'grpc-timeout': '5S' }, undefined, 1500);
    expect(headers).toEqual({ ':path': '/a.B/C', 'grpc-timeout': formatGrpcTimeout(1500) });
  });

  it('replaces grpc-timeout in the raw form, and leaves a call without a deadline without one', () => {
    expect(upstreamRequestHeaders({}, [':path', '/a.B/C', 'grpc-timeout', '5S'], 250)).toEqual([':path', '/a.B/C', 'grpc-timeout', formatGrpcTimeout(250)]);
    expect(upstreamRequestHeaders({ ':path': '/a.B/C' }, undefined, undefined)).toEqual({ ':path': '/a.B/C' });
  });

  it('caps the forwarded timeout at what the engine can time', () => {
    const headers = upstreamRequestHeaders({}, undefined, Number.MAX_SAFE_INTEGER) as Record<string, string>;
    expect(headers['grpc-timeout']).toBe(formatGrpcTimeout(MAX_FORWARDED_TIMEOUT_MS));
  });
});
