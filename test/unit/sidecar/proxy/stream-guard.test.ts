/** stream-guard: each operation skips what a closed or answered stream can no longer take, and a throw is reported, never thrown. */
import { describe, expect, it } from 'vitest';
import {
  destroyStream,
  guardedEnd,
  guardedReset,
  guardedRespond,
  guardedTrailers,
  guardedWrite,
  isWritable,
  type StreamFaultSink,
} from '../../../../src/sidecar/proxy/stream-guard.js';
import { FakeDownstream } from '../../../support/fake-call-streams.js';

function sink(): StreamFaultSink & { faults: string[] } {
  const faults: string[] = [];
  return { faults, onStreamFault: (operation) => faults.push(operation) };
}

const END = { endStream: true } as const;
const TRAILERS = { waitForTrailers: true } as const;

describe('stream-guard', () => {
  it('sees a stream as writable until it is ended, closed or destroyed', () => {
    const states = [new FakeDownstream(), Object.assign(new FakeDownstream(), { writableEnded: true }), Object.assign(new FakeDownstream(), { closed: true })];
    states.push(new FakeDownstream().destroy());
    expect(states.map(isWritable)).toEqual([true, false, false, false]);
  });

  it('responds once: a second answer or one on a closed stream is skipped, not thrown', () => {
    const down = new FakeDownstream();
    const s = sink();
    expect(guardedRespond(down, { ':status': 200 }, TRAILERS, s)).toBe(true);
    expect(guardedRespond(down, { ':status': 200 }, END, s)).toBe(false);
    const closed = Object.assign(new FakeDownstream(), { closed: true });
    expect(guardedRespond(closed, { ':status': 200 }, END, s)).toBe(false);
    expect([down.ops, closed.ops, s.faults]).toEqual([['respond'], [], []]);
  });

  it('reports the operation that threw although the guard allowed it, and returns the safe answer', () => {
    const down = new FakeDownstream();
    const s = sink();
    down.sendTrailers = () => {
      throw new Error('boom');
    };
    down.write = () => {
      throw new Error('boom');
    };
    down.end = () => {
      throw new Error('boom');
    };
    down.close = () => {
      throw new Error('boom');
    };
    guardedTrailers(down, {}, s);
    expect(guardedWrite(down, Buffer.alloc(1), s)).toBe(true); // no 'drain' will come: do not pause the source
    expect(guardedEnd(down, s)).toBe(false);
    guardedReset(down, 8, s);
    expect(s.faults).toEqual(['send trailers', 'write', 'end', 'reset']);
  });

  it('skips writes, ends and trailers on a stream that is gone', () => {
    const down = new FakeDownstream();
    const s = sink();
    down.close(8);
    expect(guardedWrite(down, Buffer.alloc(1), s)).toBe(true);
    expect(guardedEnd(down, s)).toBe(false);
    guardedTrailers(down, {}, s);
    guardedReset(down, 2, s);
    expect([down.ops, s.faults]).toEqual([['close 8'], []]);
  });

  it('passes on a full flow-control window as false', () => {
    const down = Object.assign(new FakeDownstream(), { writeReturns: false });
    expect(guardedWrite(down, Buffer.alloc(5), sink())).toBe(false);
  });

  it('destroys a stream once', () => {
    const down = new FakeDownstream();
    destroyStream(down);
    destroyStream(down);
    expect(down.ops).toEqual(['destroy']);
  });
});
