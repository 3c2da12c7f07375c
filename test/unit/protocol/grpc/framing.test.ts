/**
 * gRPC length-prefixed messages for the sidecar's own services (health, WorkerLoad) and its
 * unary calls: the 5-byte prefix written, and a request body read whole under a byte cap, its
 * first message returned, anything malformed a FramingError.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { FramingError, frameMessage, readSingleMessage } from '../../../../src/protocol/grpc/framing.js';

const body = (...chunks: (Buffer | number[])[]): Readable => Readable.from(chunks.map((c) => Buffer.from(c)));

async function framingError(promise: Promise<unknown>): Promise<FramingError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(FramingError);
  return err as FramingError;
}

describe('frameMessage', () => {
  it('writes flag 0, the big-endian length, then the payload', () => {
    expect([...frameMessage(Uint8Array.of(0xaa, 0xbb, 0xcc))]).toEqual([0, 0, 0, 0, 3, 0xaa, 0xbb, 0xcc]);
    expect([...frameMessage(new Uint8Array(0))]).toEqual([0, 0, 0, 0, 0]);
  });

  it('writes lengths beyond one byte in network order', () => {
    const framed = frameMessage(new Uint8Array(0x01_02_03).fill(7));
    expect([...framed.subarray(0, 5)]).toEqual([0, 0x00, 0x01, 0x02, 0x03]);
    expect(framed.length).toBe(5 + 0x01_02_03);
    expect(framed.subarray(5).every((b) => b === 7)).toBe(true);
  });
});

describe('readSingleMessage', () => {
  it("returns what frameMessage framed, whichever way the body's bytes are chunked", async () => {
    const framed = frameMessage(Buffer.from('hello gRPC'));
    for (let cut = 0; cut <= framed.length; cut++) {
      const payload = await readSingleMessage(body(framed.subarray(0, cut), framed.subarray(cut)), 1024);
      expect(payload.toString()).toBe('hello gRPC');
    }
  });

  it('reads an empty body as an empty message (our services take empty requests)', async () => {
    expect((await readSingleMessage(body(), 1024)).length).toBe(0);
    expect((await readSingleMessage(body(frameMessage(new Uint8Array(0))), 1024)).length).toBe(0);
  });

  it('returns only the first message when the body holds more', async () => {
    const payload = await readSingleMessage(body(Buffer.concat([frameMessage(Buffer.from('one')), frameMessage(Buffer.from('two'))])), 1024);
    expect(payload.toString()).toBe('one');
  });

  it('takes a body of exactly maxBytes, refuses one byte more', async () => {
    const framed = frameMessage(Buffer.alloc(95, 1)); // 100 bytes
    expect((await readSingleMessage(body(framed), 100)).length).toBe(95);
    const err = await framingError(readSingleMessage(body(framed.subarray(0, 60), framed.subarray(60), [0]), 100));
    expect(err.message).toBe('request body larger than 100 bytes');
    expect(err.name).toBe('FramingError');
  });

  it('stops reading at the cap instead of buffering a body that never ends', async () => {
    let chunksRead = 0;
    const endless = Readable.from(
      (function* () {
        for (;;) {
          chunksRead++;
          yield Buffer.alloc(1000);
        }
      })(),
    );
    const err = await framingError(readSingleMessage(endless, 10_000));
    expect(err.message).toBe('request body larger than 10000 bytes');
    expect(chunksRead).toBeLessThan(20);
    expect(endless.destroyed).toBe(true);
  });

  it.each([
    ['a prefix shorter than 5 bytes', [0, 0, 0, 1], 'truncated gRPC message prefix'],
    ['a payload shorter than its declared length', [0, 0, 0, 0, 4, 1, 2, 3], 'truncated gRPC message'],
    ['a compressed message (flag 1)', [1, 0, 0, 0, 1, 9], 'compressed messages are not supported by the sidecar health service'],
    ['any flag other than 0', [0x80, 0, 0, 0, 0], 'compressed messages are not supported by the sidecar health service'],
  ])('refuses %s', async (_what, bytes, message) => {
    expect((await framingError(readSingleMessage(body(bytes), 1024))).message).toBe(message);
  });

  it("passes the body's own error on", async () => {
    const failing = new Readable({ read() {} });
    const reading = readSingleMessage(failing, 1024);
    failing.push(Buffer.from([0, 0]));
    failing.destroy(new Error('stream reset'));
    await expect(reading).rejects.toThrow('stream reset');
  });
});
