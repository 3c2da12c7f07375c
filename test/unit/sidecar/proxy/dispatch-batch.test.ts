/**
 * Dispatch turns: at once for ordinary connections, after the current turn of the event loop
 * (FIFO) for connections that reset more than one call in ten before any answer.
 */
import { EventEmitter } from 'node:events';
import type { Http2Session, ServerHttp2Stream } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/platform/log.js';
import { limitConnection, noteEarlyReset, trackStream } from '../../../../src/sidecar/proxy/connection-limits.js';
import { DispatchBatch } from '../../../../src/sidecar/proxy/dispatch-batch.js';

const sessions: EventEmitter[] = [];
afterEach(() => sessions.splice(0).forEach((session) => session.emit('close'))); // stops the connection timers

/** A client connection with `streams` calls, `early` of them reset before any answer. */
function connectionWith(streams: number, early: number): ServerHttp2Stream {
  const session = Object.assign(new EventEmitter(), { destroyed: false, destroy() {}, goaway() {} });
  sessions.push(session);
  limitConnection(session as unknown as Http2Session, { idleTimeoutMs: 0, handshakeTimeoutMs: 60_000, logger: silentLogger });
  let stream: ServerHttp2Stream | undefined;
  for (let i = 0; i < streams; i++) {
    stream = Object.assign(new EventEmitter(), { session }) as unknown as ServerHttp2Stream;
    trackStream(stream);
    if (i < early) noteEarlyReset(stream);
  }
  return stream!;
}

describe('DispatchBatch', () => {
  it('dispatches at once on a connection whose resets are rare (1 in 20)', () => {
    const order: string[] = [];
    new DispatchBatch().schedule({ onDispatchTurn: () => order.push('a') }, connectionWith(20, 1));
    expect(order).toEqual(['a']);
  });

  it('holds the calls of a connection that resets early until the current read is processed, then runs them in order', async () => {
    const order: string[] = [];
    const batch = new DispatchBatch();
    const suspect = connectionWith(3, 1);
    batch.schedule({ onDispatchTurn: () => order.push('first') }, suspect);
    batch.schedule({ onDispatchTurn: () => order.push('second') }, suspect);
    expect(order).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['first', 'second']);
  });
});
