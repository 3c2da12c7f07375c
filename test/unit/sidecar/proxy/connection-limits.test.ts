/** Which client resets count against a connection as early (Rapid Reset) resets, and when the connection is shed for them. */
import { EventEmitter } from 'node:events';
import type { Http2Session, ServerHttp2Stream } from 'node:http2';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../../src/platform/log.js';
import {
  EARLY_RESET_MIN_STREAMS,
  EARLY_RESET_WINDOW_MS,
  isEarlyReset,
  limitConnection,
  noteEarlyReset,
  trackStream,
} from '../../../../src/sidecar/proxy/connection-limits.js';

describe('isEarlyReset', () => {
  it('counts a reset soon after the call arrived, and none after the window', () => {
    expect(isEarlyReset(1000, 1001, undefined)).toBe(true);
    expect(isEarlyReset(1000, 1000 + EARLY_RESET_WINDOW_MS - 1, undefined)).toBe(true);
    expect(isEarlyReset(1000, 1000 + EARLY_RESET_WINDOW_MS, undefined)).toBe(false);
  });

  it('does not count a client giving up at its own deadline, a moment ahead of the sidecar (301 ms deadline, reset at 300 ms)', () => {
    expect(isEarlyReset(0, 300, 301)).toBe(false);
    expect(isEarlyReset(0, 100, 301)).toBe(true);
    // A tiny deadline does not hide a reset sent at once.
    expect(isEarlyReset(0, 0.05, 1)).toBe(true);
  });
});

/** A client connection on a fake clock: open streams, reset some early, see whether it is shed. */
/** `open(n, early)`: n calls, `early` of them (spread evenly) reset early. */
function fakeConnection(): { open(n: number, early: number): void; advance(ms: number): void; shed: () => boolean; destroyed: () => boolean; close(): void } {
  let now = 1_000_000;
  let closes = 0;
  let destroys = 0;
  const session = Object.assign(new EventEmitter(), {
    destroyed: false,
    closed: false,
    close() {
      closes++;
    },
    destroy() {
      destroys++;
    },
    goaway() {},
  });
  limitConnection(session as unknown as Http2Session, { idleTimeoutMs: 0, handshakeTimeoutMs: 60_000, logger: silentLogger, now: () => now });
  return {
    open(n, early) {
      for (let i = 0; i < n; i++) {
        const stream = Object.assign(new EventEmitter(), { session }) as unknown as ServerHttp2Stream;
        trackStream(stream);
        // The early ones spread evenly among the others, as they would arrive.
        if (Math.floor(((i + 1) * early) / n) > Math.floor((i * early) / n)) noteEarlyReset(stream);
        stream.emit('close');
      }
    },
    advance: (ms) => void (now += ms),
    shed: () => closes > 0,
    destroyed: () => destroys > 0,
    close: () => void session.emit('close'),
  };
}

describe('the Rapid Reset rule', () => {
  let conn: ReturnType<typeof fakeConnection> | undefined;
  afterEach(() => conn?.close());

  it('sheds a connection most of whose recent calls were reset early, gracefully (close, never destroy)', () => {
    conn = fakeConnection();
    conn.open(EARLY_RESET_MIN_STREAMS, EARLY_RESET_MIN_STREAMS);
    expect(conn.shed()).toBe(true);
    expect(conn.destroyed(), 'destroy() would fail the calls still open').toBe(false);
  });

  it('spares a connection that resets half its calls or fewer', () => {
    conn = fakeConnection();
    for (let i = 0; i < 10; i++) {
      conn.open(EARLY_RESET_MIN_STREAMS, EARLY_RESET_MIN_STREAMS / 2);
      conn.advance(10);
    }
    expect(conn.shed()).toBe(false);
  });

  it('judges what the connection does now: an hour of good calls does not excuse a burst of early resets', () => {
    conn = fakeConnection();
    for (let i = 0; i < 3600; i++) {
      conn.open(10, 0);
      conn.advance(1000);
    }
    conn.open(2 * EARLY_RESET_MIN_STREAMS, 2 * EARLY_RESET_MIN_STREAMS);
    expect(conn.shed()).toBe(true);
  });

  it('forgets old resets: a cancel now and then, spread over minutes, never adds up to a shed', () => {
    conn = fakeConnection();
    for (let i = 0; i < 600; i++) {
      conn.open(2, 2); // 2 streams a second, both cancelled early: 1,200 early resets over 10 minutes
      conn.advance(1000);
    }
    expect(conn.shed()).toBe(false);
  });
});

describe('the idle rule', () => {
  afterEach(() => vi.useRealTimers());

  // Node clears a destroyed stream's `session` before its 'close': a reset call must still count as closed.
  it.each([
    ['ended', false],
    ['reset by the client (destroyed before its close)', true],
  ])('closes a connection idle for the timeout after its last stream was %s', (_how, destroyed) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    let closes = 0;
    const session = Object.assign(new EventEmitter(), { destroyed: false, closed: false, close: () => void closes++, destroy() {}, ping: () => true });
    limitConnection(session as unknown as Http2Session, { idleTimeoutMs: 1000, handshakeTimeoutMs: 60_000, logger: silentLogger });
    session.emit('remoteSettings');
    const fake: EventEmitter & { session: object | undefined } = Object.assign(new EventEmitter(), { session });
    trackStream(fake as unknown as ServerHttp2Stream);
    vi.advanceTimersByTime(5000);
    expect(closes, 'a stream is open: not idle').toBe(0);
    if (destroyed) fake.session = undefined;
    fake.emit('close');
    vi.advanceTimersByTime(999);
    expect(closes).toBe(0);
    vi.advanceTimersByTime(1001);
    expect(closes, 'GOAWAY once idle for the timeout').toBe(1);
    session.emit('close');
  });
});
