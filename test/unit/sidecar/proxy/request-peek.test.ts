import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { peekFirstMessage, type PeekableStream } from '../../../../src/sidecar/proxy/request-peek.js';
import { fakeClock } from '../../../support/fake-call-streams.js';

function frame(payload: Buffer, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

function setUp(maxBytes = 1024, timeoutMs = 1000) {
  const stream = Object.assign(new PassThrough(), { close: () => {} }) as PassThrough & PeekableStream;
  const clock = fakeClock();
  const outcome: { message?: Uint8Array | undefined; ended?: 'message' | 'truncated' | 'gone' } = {};
  peekFirstMessage(stream, maxBytes, timeoutMs, clock, {
    message: (payload) => Object.assign(outcome, { message: payload, ended: 'message' }),
    truncated: () => (outcome.ended = 'truncated'),
    gone: () => (outcome.ended = 'gone'),
  });
  /** What the call reads afterwards, as the proxy does (a 'data' listener, then resume). */
  const readRest = (): Promise<Buffer> =>
    new Promise((resolve) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => resolve(Buffer.concat(chunks)));
      stream.resume();
    });
  return { stream, clock, outcome, readRest };
}

describe('peekFirstMessage', () => {
  it('reads the first message from pieces and puts every byte back for the call', async () => {
    const { stream, outcome, readRest } = setUp();
    const payload = Buffer.from('a prompt of some tokens');
    const bytes = Buffer.concat([frame(payload), frame(Buffer.from('second'))]);
    stream.write(bytes.subarray(0, 3));
    stream.write(bytes.subarray(3, 10));
    expect(outcome.ended).toBeUndefined();
    stream.write(bytes.subarray(10));
    await new Promise((r) => setImmediate(r));
    expect(outcome.ended).toBe('message');
    expect(Buffer.from(outcome.message!)).toEqual(payload);
    stream.end();
    expect(await readRest()).toEqual(bytes);
  });

  it('gives no message for a compressed or oversized one, and forwards it untouched', async () => {
    for (const bytes of [frame(Buffer.from('x'.repeat(10)), true), frame(Buffer.alloc(2000))]) {
      const { stream, outcome, readRest } = setUp(1024);
      stream.write(bytes);
      await new Promise((r) => setImmediate(r));
      expect(outcome).toEqual({ message: undefined, ended: 'message' });
      stream.end();
      expect(await readRest()).toEqual(bytes);
    }
  });

  it('gives no message when none is whole within its time, and forwards what came', async () => {
    const { stream, clock, outcome, readRest } = setUp(1024, 500);
    const bytes = frame(Buffer.alloc(100));
    stream.write(bytes.subarray(0, 20));
    await new Promise((r) => setImmediate(r));
    clock.timers.advance(500);
    expect(outcome).toEqual({ message: undefined, ended: 'message' });
    stream.end(bytes.subarray(20));
    expect(await readRest()).toEqual(bytes);
  });

  it('says truncated when the body ends inside the first message, and gone when the client leaves', async () => {
    const truncated = setUp();
    truncated.stream.end(frame(Buffer.alloc(100)).subarray(0, 30));
    truncated.stream.resume();
    await new Promise((r) => setImmediate(r));
    expect(truncated.outcome.ended).toBe('truncated');

    const gone = setUp();
    gone.stream.write(Buffer.alloc(3));
    gone.stream.destroy();
    await new Promise((r) => setImmediate(r));
    expect(gone.outcome.ended).toBe('gone');
    gone.clock.timers.advance(5000); // its timer was cleared: the outcome stays the one given
    expect(gone.outcome).toEqual({ ended: 'gone' });
  });
});
