/** call-timers: the deadline fires on time (in steps past node's timer range), the queue timeout only when it comes first. */
import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS } from '../../../../src/protocol/grpc/deadline.js';
import { CallTimers } from '../../../../src/sidecar/proxy/call-timers.js';
import { fakeClock } from '../../../support/fake-call-streams.js';

function timers() {
  const clock = fakeClock();
  const fired: string[] = [];
  const call = { onDeadline: () => fired.push(`deadline@${clock.now()}`), onQueueTimeout: () => fired.push(`queue@${clock.now()}`) };
  return { clock, fired, timers: new CallTimers(clock, call) };
}

describe('CallTimers', () => {
  it('tells the call at its deadline, not before', () => {
    const t = timers();
    t.timers.armDeadline(500);
    t.clock.timers.advance(499);
    expect(t.fired).toEqual([]);
    t.clock.timers.advance(1);
    expect(t.fired).toEqual(['deadline@500']);
  });

  it('fires a deadline beyond the timer range early, at the range, so the call can re-arm it', () => {
    const t = timers();
    t.timers.armDeadline(MAX_TIMER_MS * 2 + 5);
    t.clock.timers.advance(MAX_TIMER_MS);
    expect(t.fired).toEqual([`deadline@${MAX_TIMER_MS}`]);
  });

  it('fires an already passed deadline at once (delay 0), never with a negative delay', () => {
    const t = timers();
    t.clock.timers.now = 100;
    t.timers.armDeadline(50);
    t.clock.timers.advance(0);
    expect(t.fired).toEqual(['deadline@100']);
  });

  it('arms the queue timeout only when set and earlier than the deadline', () => {
    const t = timers();
    t.timers.armQueueTimeout(0, 0, undefined);
    t.timers.armQueueTimeout(undefined, 0, undefined);
    t.timers.armQueueTimeout(200, 0, 200); // the deadline comes first (or together): DEADLINE_EXCEEDED wins
    expect(t.clock.timers.active).toBe(0);
    t.timers.armQueueTimeout(200, 0, 201);
    t.clock.timers.advance(200);
    expect(t.fired).toEqual(['queue@200']);
  });

  it('clears the queue timeout alone, or both timers', () => {
    const t = timers();
    t.timers.armDeadline(1000);
    t.timers.armQueueTimeout(100, 0, undefined);
    t.timers.clearQueueTimeout();
    expect(t.clock.timers.active).toBe(1);
    t.timers.armQueueTimeout(100, 0, undefined);
    t.timers.clearAll();
    expect(t.clock.timers.active).toBe(0);
    t.clock.timers.advance(2000);
    expect(t.fired).toEqual([]);
  });

  it('does not clear a fired timer again (its handle is forgotten when it fires)', () => {
    const t = timers();
    const cleared: unknown[] = [];
    const clock = { ...t.clock, clearTimer: (handle: unknown) => cleared.push(handle) };
    const own = new CallTimers(clock, { onDeadline: () => {}, onQueueTimeout: () => {} });
    own.armDeadline(10);
    t.clock.timers.advance(10);
    own.clearAll();
    expect(cleared).toEqual([]);
  });
});
