/**
 * The hostile tests' own HTTP/2 codec, checked against RFC 7541's examples and against a real
 * node:http2 (nghttp2) server, which Huffman-encodes and indexes what it sends.
 */
import { createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ErrorCode,
  FrameReader,
  FrameType,
  H2Wire,
  HpackDecoder,
  encodeHeaders,
  frame,
  huffmanCode,
  huffmanDecode,
  huffmanEncode,
  headerValue,
} from '../../support/h2-wire.js';

describe('HPACK', () => {
  it('rebuilds the RFC 7541 Huffman codes from their lengths', () => {
    expect(huffmanCode[48]).toEqual([0x0, 5]); // '0'
    expect(huffmanCode[32]).toEqual([0x14, 6]); // ' '
    expect(huffmanCode[88]).toEqual([0xfc, 8]); // 'X'
    expect(huffmanCode[92]).toEqual([0x7fff0, 19]); // '\'
    expect(huffmanCode[0]).toEqual([0x1ff8, 13]);
    expect(huffmanCode[10]).toEqual([0x3ffffffc, 30]);
    expect(huffmanCode[255]).toEqual([0x3ffffee, 26]);
    expect(huffmanCode[256]).toEqual([0x3fffffff, 30]); // EOS
  });

  it('decodes the RFC 7541 C.4.1 example and round-trips every byte', () => {
    // "www.example.com"
    expect(huffmanDecode(Buffer.from('f1e3c2e5f23a6ba0ab90f4ff', 'hex')).toString()).toBe('www.example.com');
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    expect(huffmanDecode(huffmanEncode(all))).toEqual(all);
  });

  it('decodes indexed fields, incremental indexing and the dynamic table (RFC 7541 C.3)', () => {
    const decoder = new HpackDecoder();
    expect(decoder.decode(Buffer.from('828684410f7777772e6578616d706c652e636f6d', 'hex'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
    ]);
    expect(decoder.decode(Buffer.from('828684be58086e6f2d6361636865', 'hex'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
      ['cache-control', 'no-cache'],
    ]);
  });

  it('reads back what its encoder writes', () => {
    const headers: [string, string][] = [
      ['x-long', 'v'.repeat(300)],
      [':path', '/a'],
    ];
    expect(new HpackDecoder().decode(encodeHeaders(headers))).toEqual(headers);
  });
});

describe('frames', () => {
  it('splits a byte stream into frames across chunk boundaries', () => {
    const bytes = Buffer.concat([frame(FrameType.PING, 0, 0, Buffer.alloc(8, 7)), frame(FrameType.DATA, 1, 3, Buffer.from('abc'))]);
    const reader = new FrameReader();
    const frames = [...reader.push(bytes.subarray(0, 5)), ...reader.push(bytes.subarray(5, 20)), ...reader.push(bytes.subarray(20))];
    expect(frames.map((f) => [f.type, f.flags, f.streamId, f.payload.length])).toEqual([
      [FrameType.PING, 0, 0, 8],
      [FrameType.DATA, 1, 3, 3],
    ]);
  });
});

describe('H2Wire against node:http2', () => {
  let server: Http2Server;
  let port: number;
  beforeAll(async () => {
    server = createServer();
    server.on('stream', (stream, headers) => {
      stream.on('error', () => {});
      if (headers[':path'] === '/reset') return void stream.close(ErrorCode.ENHANCE_YOUR_CALM);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-echo': String(headers['x-echo'] ?? '') }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '14', 'grpc-message': 'upstream%20gone: sorry' }));
      stream.end(Buffer.alloc(100_000, 1));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('reads Huffman-coded, indexed headers, trailers, data and resets from nghttp2', async () => {
    const wire = await H2Wire.connect(port);
    try {
      const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i))
        .join('')
        .trim();
      const ids = [1, 2].map(() =>
        wire.sendHeaders(
          [
            [':method', 'POST'],
            [':scheme', 'http'],
            [':path', '/x'],
            [':authority', 'a'],
            ['x-echo', printable],
          ],
          { endStream: true },
        ),
      );
      const reset = wire.sendHeaders(
        [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':path', '/reset'],
          [':authority', 'a'],
        ],
        { endStream: true },
      );
      await wire.until(() => [...ids, reset].every((id) => wire.isDone(id)), 5000, 'three answers');
      for (const id of ids) {
        const s = wire.streams.get(id)!;
        expect(headerValue(s.headerBlocks[0], ':status')).toBe('200');
        expect(headerValue(s.headerBlocks[0], 'x-echo')).toBe(printable);
        expect(wire.grpcStatus(id)).toBe(14);
        expect(wire.grpcMessage(id)).toBe('upstream%20gone: sorry');
        expect(s.dataBytes).toBe(100_000);
      }
      expect(wire.streams.get(reset)!.rstCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
      expect(wire.peerSettingsReceived).toBe(true);
    } finally {
      wire.destroy();
    }
  });
});
