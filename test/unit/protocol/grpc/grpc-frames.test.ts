import { describe, expect, it } from 'vitest';
import { GrpcFrameReader, type GrpcFrame } from '../../../../src/protocol/grpc/grpc-frames.js';

const frame = (payload: Uint8Array | string, flag = 0, declared?: number): Buffer => {
  const body = typeof payload === 'string' ? Buffer.from(payload) : Buffer.from(payload);
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(declared ?? body.length, 1);
  return Buffer.concat([head, body]);
};
const text = (frames: GrpcFrame[]): string[] => frames.map((f) => (f.kind === 'message' ? Buffer.from(f.payload).toString() : f.kind));

describe('GrpcFrameReader', () => {
  it('returns several messages from one chunk, including an empty one', () => {
    const r = new GrpcFrameReader();
    expect(text(r.push(Buffer.concat([frame('a'), frame(''), frame('bcd')])))).toEqual(['a', '', 'bcd']);
  });

  it('reassembles a message split at every possible byte boundary', () => {
    const stream = Buffer.concat([frame('hello world'), frame('x')]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const r = new GrpcFrameReader();
      expect(text([...r.push(stream.subarray(0, cut)), ...r.push(stream.subarray(cut))])).toEqual(['hello world', 'x']);
    }
  });

  it('feeds byte by byte', () => {
    const r = new GrpcFrameReader();
    const out: GrpcFrame[] = [];
    for (const b of Buffer.concat([frame('ab'), frame('cde')])) out.push(...r.push(Uint8Array.of(b)));
    expect(text(out)).toEqual(['ab', 'cde']);
  });

  it('returns a view, not a copy, when a message lies in one chunk', () => {
    const chunk = frame('zero-copy');
    const [f] = new GrpcFrameReader().push(chunk);
    expect(f?.kind === 'message' && f.payload.buffer === chunk.buffer).toBe(true);
  });

  it('skips compressed messages without decoding and keeps framing', () => {
    const r = new GrpcFrameReader();
    expect(text(r.push(Buffer.concat([frame('zz', 1), frame('ok')])))).toEqual(['compressed', 'ok']);
    expect(r.stats).toMatchObject({ compressed: 1, messages: 1 });
  });

  it('skips an oversized message as it streams past, without buffering it', () => {
    const r = new GrpcFrameReader({ maxMessageBytes: 8 });
    const head = frame('', 0, 64 * 1024 * 1024).subarray(0, 5);
    expect(r.push(head)).toEqual([]);
    const piece = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < 63; i++) expect(r.push(piece)).toEqual([]);
    expect(r.push(Buffer.concat([piece, frame('after')]))).toEqual([
      { kind: 'oversized', length: 64 * 1024 * 1024 },
      { kind: 'message', payload: Buffer.from('after') },
    ]);
    expect(r.stats).toMatchObject({ oversized: 1, messages: 1 });
  });

  it('stops at an invalid flag byte and ignores the rest of the stream', () => {
    const r = new GrpcFrameReader();
    expect(text(r.push(Buffer.concat([frame('a'), frame('b', 7), frame('c')])))).toEqual(['a', 'invalid']);
    expect(r.push(frame('d'))).toEqual([]);
    expect(r.stats.invalid).toBe(1);
  });
});
