/** Connection-specific headers are dropped and `te` normalised before a request reaches the engine. */
import type { IncomingHttpHeaders } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { isHeaderError, stripConnectionHeaders } from '../../../../src/sidecar/proxy/request-headers.js';

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

describe('isHeaderError', () => {
  it("tells node's header refusals from session failures", () => {
    expect(isHeaderError(Object.assign(new TypeError('forbidden'), { code: 'ERR_HTTP2_INVALID_CONNECTION_HEADERS' }))).toBe(true);
    expect(isHeaderError(Object.assign(new TypeError('bad char'), { code: 'ERR_INVALID_CHAR' }))).toBe(true);
    expect(isHeaderError(Object.assign(new Error('gone'), { code: 'ERR_HTTP2_INVALID_SESSION' }))).toBe(false);
    expect(isHeaderError(new Error('no code'))).toBe(false);
    expect(isHeaderError(undefined)).toBe(false);
  });
});
