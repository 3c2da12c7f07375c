// The queue's order on its own: priority, round-robin across tenants, FIFO within a tenant, the starvation bound, and whom a full queue gives up.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { QueuedCall, WaitingRoom } from '../../../../src/sidecar/admission/waiting-room.js';

class Call extends QueuedCall {
  constructor(
    readonly name: string,
    priority: number,
    tenant = '',
  ) {
    super({ priority, tenant });
  }
}

function drain(room: WaitingRoom): string[] {
  const order: string[] = [];
  for (let call = room.takeNext(); call; call = room.takeNext()) order.push((call as Call).name);
  return order;
}

function fill(room: WaitingRoom, calls: [name: string, priority: number, tenant?: string][]): Map<string, Call> {
  const byName = new Map<string, Call>();
  for (const [name, priority, tenant] of calls) {
    const call = new Call(name, priority, tenant);
    byName.set(name, call);
    room.add(call);
  }
  return byName;
}

describe('WaitingRoom order', () => {
  it('is FIFO for calls of one priority and no tenant (what a sidecar sent no metadata always did)', () => {
    const room = new WaitingRoom(1_000_000);
    fill(room, [
      ['a', 0],
      ['b', 0],
      ['c', 0],
    ]);
    expect(room.size).toBe(3);
    expect(drain(room)).toEqual(['a', 'b', 'c']);
    expect(room.size).toBe(0);
    expect(room.takeNext()).toBeUndefined();
  });

  it('admits the more urgent priority (lower number) first, FIFO within one', () => {
    const room = new WaitingRoom(1_000_000);
    fill(room, [
      ['low1', 5],
      ['high1', 0],
      ['mid', 2],
      ['low2', 5],
      ['high2', 0],
      ['urgent', -3],
    ]);
    expect(drain(room)).toEqual(['urgent', 'high1', 'high2', 'mid', 'low1', 'low2']);
  });

  it('takes turns across tenants within a priority, so a burst waits behind the others', () => {
    const room = new WaitingRoom(1_000_000);
    fill(room, [
      ['n1', 0, 'noisy'],
      ['n2', 0, 'noisy'],
      ['n3', 0, 'noisy'],
      ['n4', 0, 'noisy'],
      ['p1', 0, 'polite'],
      ['q1', 0, 'quiet'],
      ['p2', 0, 'polite'],
    ]);
    expect(drain(room)).toEqual(['n1', 'p1', 'q1', 'n2', 'p2', 'n3', 'n4']);
  });

  it('puts a tenant that starts waiting at the end of the round in progress', () => {
    const room = new WaitingRoom(1_000_000);
    fill(room, [
      ['a1', 0, 'a'],
      ['a2', 0, 'a'],
      ['b1', 0, 'b'],
      ['b2', 0, 'b'],
    ]);
    expect((room.takeNext() as Call).name).toBe('a1'); // b is next
    fill(room, [['c1', 0, 'c']]);
    expect(drain(room)).toEqual(['b1', 'a2', 'c1', 'b2']);
  });

  it('keeps the round right when a call leaves from the middle (cancelled, timed out)', () => {
    const room = new WaitingRoom(1_000_000);
    const calls = fill(room, [
      ['a1', 0, 'a'],
      ['b1', 0, 'b'],
      ['c1', 0, 'c'],
      ['a2', 0, 'a'],
      ['c2', 0, 'c'],
    ]);
    expect((room.takeNext() as Call).name).toBe('a1');
    room.remove(calls.get('b1')!); // b leaves the round while it is b's turn
    room.remove(calls.get('b1')!); // twice changes nothing
    expect(room.size).toBe(3);
    expect(drain(room)).toEqual(['c1', 'a2', 'c2']);
  });

  it('counts the calls a new call of a priority would wait behind, and the calls per priority', () => {
    const room = new WaitingRoom(16);
    fill(room, [
      ['a', 3],
      ['b', 0],
      ['c', 0],
      ['d', 7],
    ]);
    expect(room.queuedAhead({ priority: -1, tenant: '' })).toBe(0);
    expect(room.queuedAhead({ priority: 0, tenant: '' })).toBe(2);
    expect(room.queuedAhead({ priority: 5, tenant: '' })).toBe(3);
    expect(room.queuedAhead({ priority: 7, tenant: '' })).toBe(4);
    expect(room.sizesByPriority()).toEqual([
      [0, 2],
      [3, 1],
      [7, 1],
    ]);
  });
});

describe('WaitingRoom position of a new call among tenants', () => {
  it('counts only the turns of the other tenants that come before it in the round', () => {
    const room = new WaitingRoom(16);
    fill(room, [
      ['n1', 0, 'noisy'],
      ['n2', 0, 'noisy'],
      ['n3', 0, 'noisy'],
      ['n4', 0, 'noisy'],
      ['p1', 0, 'polite'],
      ['u1', -1, 'urgent'],
    ]);
    // A new tenant: one turn of each other tenant, and every more urgent call.
    expect(room.queuedAhead({ priority: 0, tenant: 'new' })).toBe(3);
    // polite already holds one place: two turns of noisy's, its own one.
    expect(room.queuedAhead({ priority: 0, tenant: 'polite' })).toBe(4);
    // noisy: behind all its own four and polite's one.
    expect(room.queuedAhead({ priority: 0, tenant: 'noisy' })).toBe(6);
  });

  it('names whom a full queue refuses: the lowest priority, and the tenants holding the most places', () => {
    const room = new WaitingRoom(16);
    expect(room.refusedWhenFull()).toBeUndefined();
    const calls = fill(room, [
      ['n1', 2, 'noisy'],
      ['n2', 2, 'noisy'],
      ['n3', 2, 'noisy'],
      ['q1', 2, 'quiet'],
      ['h1', 0, 'polite'],
    ]);
    expect(room.refusedWhenFull()).toEqual({ priority: 2, tenants: ['noisy'] });
    room.remove(calls.get('n3')!);
    expect(room.refusedWhenFull()).toEqual({ priority: 2, tenants: ['noisy', 'quiet'] });
    room.remove(calls.get('n2')!);
    // Every tenant holds one place: nobody could push anybody out, so every tenant is refused.
    expect(room.refusedWhenFull()).toEqual({ priority: 2, tenants: null });
  });
});

describe('WaitingRoom starvation bound', () => {
  it('admits the call waiting longest after at most S admissions that passed it over', () => {
    const limit = 3;
    const room = new WaitingRoom(limit);
    fill(room, [['old-low', 9]]);
    let next = 0;
    const admitted: string[] = [];
    // A steady stream of urgent calls: one arrives for every one admitted.
    for (let i = 0; i < 2 * (limit + 1); i++) {
      fill(room, [[`urgent${next++}`, 0]]);
      admitted.push((room.takeNext() as Call).name);
    }
    expect(admitted.indexOf('old-low')).toBe(limit);
  });

  it('bounds every waiter: with k calls queued before it, it is admitted within (k + 1) x (S + 1) admissions', () => {
    for (const seed of [1, 2, 3]) {
      const random = mulberry32(seed);
      const limit = 1 + Math.floor(random() * 5);
      const room = new WaitingRoom(limit);
      // The victim: least urgent of all, arriving after k others, then urgent calls keep coming.
      const k = Math.floor(random() * 6);
      for (let i = 0; i < k; i++) fill(room, [[`early${i}`, Math.floor(random() * 3)]]);
      fill(room, [['victim', 100]]);
      let admissions = 0;
      let found = false;
      for (let i = 0; i < 1000 && !found; i++) {
        fill(room, [[`late${i}`, Math.floor(random() * 3) - 1, `t${i % 3}`]]);
        admissions++;
        found = (room.takeNext() as Call).name === 'victim';
      }
      expect(found).toBe(true);
      expect(admissions).toBeLessThanOrEqual((k + 1) * (limit + 1));
    }
  });

  it('refuses a bound below 1', () => {
    expect(() => new WaitingRoom(0)).toThrow(RangeError);
    expect(() => new WaitingRoom(1.5)).toThrow(RangeError);
  });
});

describe('WaitingRoom displacement', () => {
  it('gives up the newest call of the lowest priority below the arrival', () => {
    const room = new WaitingRoom(16);
    const calls = fill(room, [
      ['low1', 5],
      ['mid', 2],
      ['low2', 5, 'x'],
      ['high', 0],
    ]);
    expect(room.displaceableBy({ priority: 0, tenant: '' })).toBe(calls.get('low2'));
    expect(room.displaceableBy({ priority: 4, tenant: '' })).toBe(calls.get('low2'));
    room.remove(calls.get('low2')!);
    room.remove(calls.get('low1')!);
    expect(room.displaceableBy({ priority: 0, tenant: '' })).toBe(calls.get('mid'));
  });

  it('gives up nobody for an arrival less urgent than everything queued', () => {
    const room = new WaitingRoom(16);
    fill(room, [
      ['a', 0],
      ['b', 1],
    ]);
    expect(room.displaceableBy({ priority: 2, tenant: '' })).toBeUndefined();
    expect(new WaitingRoom(16).displaceableBy({ priority: 0, tenant: '' })).toBeUndefined();
  });

  it("at the arrival's own priority, gives up the newest call of the tenant holding at least two more places than the arrival's", () => {
    const room = new WaitingRoom(16);
    const calls = fill(room, [
      ['n1', 1, 'noisy'],
      ['n2', 1, 'noisy'],
      ['p1', 1, 'polite'],
      ['n3', 1, 'noisy'],
    ]);
    expect(room.displaceableBy({ priority: 1, tenant: 'new' })).toBe(calls.get('n3'));
    expect(room.displaceableBy({ priority: 1, tenant: 'polite' })).toBe(calls.get('n3'));
    expect(room.displaceableBy({ priority: 1, tenant: 'noisy' })).toBeUndefined();
    room.remove(calls.get('n3')!);
    // noisy 2, polite 1: equal enough, nobody moves (no ping-pong between tenants).
    expect(room.displaceableBy({ priority: 1, tenant: 'polite' })).toBeUndefined();
    expect(room.displaceableBy({ priority: 1, tenant: 'new' })).toBe(calls.get('n2'));
  });
});
