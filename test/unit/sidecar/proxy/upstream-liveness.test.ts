/**
 * Keepalive (gRFC A8) with a fake clock: no PING without calls unless allowed, at most one per
 * interval, and the interval doubled, and logged, at each GOAWAY ENHANCE_YOUR_CALM
 * "too_many_pings", as grpc-core clients do. The probe itself (health checks, PINGs, timeouts)
 * runs on real sockets in upstream.test.ts and upstream-session.test.ts.
 */
import { constants } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { Keepalive } from '../../../../src/sidecar/proxy/upstream-liveness.js';
import { FakeTimers } from '../../../support/fake-timers.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const TOO_MANY_PINGS = Buffer.from('too_many_pings');

function keepalive(intervalMs: number, withoutCalls = false): { keepalive: Keepalive; clock: FakeTimers; log: ReturnType<typeof recordingLogger> } {
  const clock = new FakeTimers();
  const log = recordingLogger();
  return { keepalive: new Keepalive(intervalMs, withoutCalls, () => clock.now, log, '127.0.0.1:1'), clock, log };
}

describe('Keepalive', () => {
  it('allows no PING while the connection carries no call, unless PINGs without calls are allowed', () => {
    expect(keepalive(1_000).keepalive.due(0)).toBe(false);
    expect(keepalive(1_000).keepalive.due(1)).toBe(true);
    expect(keepalive(1_000, true).keepalive.due(0)).toBe(true);
  });

  it('allows one PING per interval', () => {
    const { keepalive: k, clock } = keepalive(1_000);
    k.sent();
    clock.advance(999);
    expect(k.due(1)).toBe(false);
    clock.advance(1);
    expect(k.due(1)).toBe(true);
  });

  it('doubles the interval at each GOAWAY ENHANCE_YOUR_CALM too_many_pings, and logs each doubling once', () => {
    const { keepalive: k, clock, log } = keepalive(1_000);
    k.sent();
    k.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, TOO_MANY_PINGS);
    expect(k.intervalMs).toBe(2_000);
    clock.advance(1_999);
    expect(k.due(1)).toBe(false);
    clock.advance(1);
    expect(k.due(1)).toBe(true);
    k.sent();
    k.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, TOO_MANY_PINGS);
    expect(k.intervalMs).toBe(4_000);
    clock.advance(3_999);
    expect(k.due(1)).toBe(false);
    const lines = log.find('the engine refused our PINGs as too many (GOAWAY ENHANCE_YOUR_CALM too_many_pings): keepalive interval doubled', 'warn');
    expect(lines.map((line) => [line.fields.fromMs, line.fields.toMs])).toEqual([
      [1_000, 2_000],
      [2_000, 4_000],
    ]);
    expect(lines[0]!.fields.upstream).toBe('127.0.0.1:1');
  });

  it('keeps its interval on any other GOAWAY: a graceful one, or ENHANCE_YOUR_CALM for another reason', () => {
    const { keepalive: k, log } = keepalive(1_000);
    k.goaway(constants.NGHTTP2_NO_ERROR, undefined);
    k.goaway(constants.NGHTTP2_NO_ERROR, TOO_MANY_PINGS);
    k.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, Buffer.from('too_many_streams'));
    k.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, undefined);
    expect(k.intervalMs).toBe(1_000);
    expect(log.lines).toEqual([]);
  });

  it('stops doubling at the longest interval a timer takes', () => {
    const { keepalive: k } = keepalive(2 ** 30);
    for (let i = 0; i < 3; i++) k.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, TOO_MANY_PINGS);
    expect(k.intervalMs).toBe(2 ** 31 - 1);
  });
});
