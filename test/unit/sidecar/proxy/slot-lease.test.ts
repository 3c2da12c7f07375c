/** slot-lease: the slot goes back exactly once, ending its tap and reporting the time it was held; the first token passes on once. */
import { describe, expect, it } from 'vitest';
import type { CallObserver, TrafficTap } from '../../../../src/sidecar/proxy/call-context.js';
import { SlotLease } from '../../../../src/sidecar/proxy/slot-lease.js';

function lease(since = 100) {
  const log: string[] = [];
  const permit = { released: false, firstToken: () => void log.push('first token'), release: () => void log.push('release') };
  const observer: CallObserver = {
    rejected: () => {},
    dispatched: () => undefined,
    slotReleased: (heldMs) => log.push(`held ${heldMs}`),
    firstToken: (afterMs) => log.push(`first token after ${afterMs}`),
  };
  const tap: TrafficTap = { request: () => {}, response: () => {}, end: () => log.push('tap end') };
  return { log, observer, tap, lease: new SlotLease(permit, since) };
}

describe('SlotLease', () => {
  it('releases the permit, ends the tap and reports the holding time, in that order', () => {
    const l = lease(100);
    l.lease.tap = l.tap;
    l.lease.release(340, l.observer);
    expect(l.log).toEqual(['release', 'tap end', 'held 240']);
    expect(l.lease.tap).toBeUndefined();
  });

  it('does nothing on a second release, whatever calls it', () => {
    const l = lease();
    l.lease.tap = l.tap;
    l.lease.release(200, l.observer);
    l.lease.release(300, l.observer);
    l.lease.release(400, undefined);
    expect(l.log.filter((line) => line === 'release')).toHaveLength(1);
    expect(l.log).toHaveLength(3);
  });

  it('needs neither a tap nor an observer', () => {
    const l = lease();
    l.lease.release(200, undefined);
    expect(l.log).toEqual(['release']);
  });

  it('passes the first token on once, with the time from the slot, and never after the release', () => {
    const l = lease(100);
    l.lease.firstToken(130, l.observer);
    l.lease.firstToken(150, l.observer);
    expect(l.log).toEqual(['first token', 'first token after 30']);
    const late = lease(100);
    late.lease.release(200, late.observer);
    late.lease.firstToken(210, late.observer);
    expect(late.log).toEqual(['release', 'held 100']);
  });
});
