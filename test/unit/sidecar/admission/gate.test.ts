import { describe, expect, it } from 'vitest';
import { AdmissionGate, type Permit, type QueueTicket } from '../../../../src/sidecar/admission/gate.js';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { admitting } from '../../../support/admitting.js';

describe('AdmissionGate', () => {
  it('admits while a slot is free, queues Q more, rejects beyond', () => {
    const gate = new AdmissionGate(2, 2);
    const kinds = Array.from({ length: 6 }, () => gate.acquire(admitting(() => {})).kind);
    expect(kinds).toEqual(['admitted', 'admitted', 'queued', 'queued', 'rejected', 'rejected']);
    expect([gate.inEngine, gate.queued]).toEqual([2, 2]);
  });

  it('hands a released slot to the head of the queue, in arrival order', () => {
    const gate = new AdmissionGate(1, 3);
    const order: number[] = [];
    const first = gate.acquire(admitting(() => {}));
    const permits: Permit[] = [];
    for (const id of [1, 2, 3]) gate.acquire(admitting((p) => (order.push(id), permits.push(p))));
    if (first.kind !== 'admitted') throw new Error('first call should be admitted');
    first.permit.release();
    expect(order).toEqual([1]);
    expect([gate.inEngine, gate.queued]).toEqual([1, 2]);
    permits[0]!.release();
    permits[1]!.release();
    expect(order).toEqual([1, 2, 3]);
  });

  it('never lets a newcomer overtake a queued call', () => {
    const gate = new AdmissionGate(1, 2);
    const held = gate.acquire(admitting(() => {}));
    const admittedFromQueue: string[] = [];
    gate.acquire(
      admitting(() => {
        admittedFromQueue.push('queued');
        // Re-entrant arrival while the slot is being handed over: it must queue, not take a slot.
        expect(gate.acquire(admitting(() => admittedFromQueue.push('late'))).kind).toBe('queued');
      }),
    );
    if (held.kind !== 'admitted') throw new Error('expected admitted');
    held.permit.release();
    expect(admittedFromQueue).toEqual(['queued']);
    expect([gate.inEngine, gate.queued]).toEqual([1, 1]);
  });

  it('releases a slot only once however often release() is called', () => {
    const gate = new AdmissionGate(2, 2);
    const a = gate.acquire(admitting(() => {}));
    if (a.kind !== 'admitted') throw new Error('expected admitted');
    a.permit.release();
    a.permit.release();
    a.permit.release();
    expect(gate.inEngine).toBe(0);
    expect(a.permit.released).toBe(true);
  });

  it('removes a cancelled waiter at once, and cancel after admission is a no-op', () => {
    const gate = new AdmissionGate(1, 3);
    const held = gate.acquire(admitting(() => {}));
    const admitted: string[] = [];
    const a = gate.acquire(admitting(() => admitted.push('a')));
    const b = gate.acquire(admitting(() => admitted.push('b')));
    if (a.kind !== 'queued' || b.kind !== 'queued' || held.kind !== 'admitted') throw new Error('unexpected admission');
    expect(a.ticket.cancel()).toBe(true);
    expect(a.ticket.cancel()).toBe(false);
    expect(gate.queued).toBe(1);
    held.permit.release();
    expect(admitted).toEqual(['b']);
    expect(b.ticket.cancel()).toBe(false);
    expect(gate.queued).toBe(0);
  });

  it('hands the slot on without recursion when admitted waiters release at once', () => {
    const gate = new AdmissionGate(1, 50_000);
    const held = gate.acquire(admitting(() => {}));
    let admittedCount = 0;
    for (let i = 0; i < 50_000; i++) gate.acquire(admitting((p) => (admittedCount++, p.release())));
    if (held.kind !== 'admitted') throw new Error('expected admitted');
    held.permit.release();
    expect(admittedCount).toBe(50_000);
    expect([gate.inEngine, gate.queued]).toEqual([0, 0]);
  });

  it('with an infinite limit admits everything and never queues (admission off)', () => {
    const gate = new AdmissionGate(Infinity, 0);
    for (let i = 0; i < 10_000; i++) expect(gate.acquire(admitting(() => {})).kind).toBe('admitted');
    expect(gate.inEngine).toBe(10_000);
  });

  it('refuses a limit below 1 or a negative queue', () => {
    expect(() => new AdmissionGate(0, 2)).toThrow(RangeError);
    expect(() => new AdmissionGate(1, -1)).toThrow(RangeError);
  });

  it('tells its subscribers about every change, until they unsubscribe', () => {
    let changes = 0;
    let other = 0;
    const gate = new AdmissionGate(1, 1);
    gate.subscribe(() => changes++);
    const unsubscribe = gate.subscribe(() => other++);
    const a = gate.acquire(admitting(() => {}));
    gate.acquire(admitting(() => {}));
    gate.acquire(admitting(() => {})); // rejected: no change
    expect(changes).toBe(2);
    expect(other).toBe(2);
    unsubscribe();
    if (a.kind === 'admitted') a.permit.release();
    expect(changes).toBe(3);
    expect(other).toBe(2);
  });

  // Hammer: random interleavings of arrive / release / cancel, checking the invariants after every step.
  it.each([1, 2, 3, 42, 1234])('keeps its invariants and FIFO under random interleavings (seed %i)', (seed) => {
    const random = mulberry32(seed);
    const limit = 1 + Math.floor(random() * 8);
    const queueLimit = 2 + Math.floor(random() * 6);
    const gate = new AdmissionGate(limit, queueLimit);
    const holding: Permit[] = [];
    const waiting: { id: number; ticket: QueueTicket }[] = [];
    const admissionOrder: number[] = [];
    const queueOrder: number[] = [];
    let nextId = 0;
    let rejected = 0;
    for (let step = 0; step < 20_000; step++) {
      const r = random();
      if (r < 0.5) {
        const id = nextId++;
        const admission = gate.acquire(
          admitting((permit) => {
            admissionOrder.push(id);
            const at = waiting.findIndex((w) => w.id === id);
            waiting.splice(at, 1);
            holding.push(permit);
          }),
        );
        if (admission.kind === 'admitted') holding.push(admission.permit);
        else if (admission.kind === 'queued') {
          waiting.push({ id, ticket: admission.ticket });
          queueOrder.push(id);
        } else {
          rejected++;
          expect(gate.inEngine).toBe(limit);
          expect(gate.queued).toBe(queueLimit);
        }
      } else if (r < 0.85 && holding.length) {
        const permit = holding.splice(Math.floor(random() * holding.length), 1)[0]!;
        permit.release();
        if (random() < 0.1) permit.release(); // a second release must change nothing
      } else if (waiting.length) {
        const { id, ticket } = waiting.splice(Math.floor(random() * waiting.length), 1)[0]!;
        expect(ticket.cancel()).toBe(true);
        queueOrder.splice(queueOrder.indexOf(id), 1);
      }
      expect(gate.inEngine).toBe(holding.length);
      expect(gate.queued).toBe(waiting.length);
      expect(gate.inEngine).toBeLessThanOrEqual(limit);
      expect(gate.queued).toBeLessThanOrEqual(queueLimit);
      if (gate.queued > 0) expect(gate.inEngine).toBe(limit);
    }
    // Queued calls reached the engine in the order they queued (cancelled ones removed).
    const admittedFromQueue = admissionOrder;
    expect(admittedFromQueue).toEqual(queueOrder.slice(0, admittedFromQueue.length));
    expect(rejected).toBeGreaterThan(0);
  });
});

describe('AdmissionGate.setLimits (live N and Q)', () => {
  /** Fills the gate: `inEngine` admitted permits and `queued` waiters that record their admission order. */
  function filled(limit: number, queueLimit: number, queued: number) {
    const gate = new AdmissionGate(limit, queueLimit);
    const permits: Permit[] = [];
    const order: number[] = [];
    for (let i = 0; i < limit; i++) {
      const a = gate.acquire(admitting(() => {}));
      if (a.kind !== 'admitted') throw new Error('expected admitted');
      permits.push(a.permit);
    }
    for (let id = 0; id < queued; id++) expect(gate.acquire(admitting((p) => (order.push(id), permits.push(p)))).kind).toBe('queued');
    return { gate, permits, order };
  }

  it('raising N admits queued calls at once, oldest first, up to the new N', () => {
    const { gate, order } = filled(2, 6, 5);
    gate.setLimits(5, 6);
    expect(order).toEqual([0, 1, 2]);
    expect([gate.inEngine, gate.queued, gate.limit]).toEqual([5, 2, 5]);
    gate.setLimits(100, 6);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect([gate.inEngine, gate.queued]).toEqual([7, 0]);
  });

  it('lowering N cancels nothing and admits nobody until fewer than the new N are in the engine', () => {
    const { gate, permits, order } = filled(6, 4, 3);
    gate.setLimits(2, 4);
    expect([gate.inEngine, gate.queued]).toEqual([6, 3]);
    expect(permits.every((p) => !p.released)).toBe(true);
    // A newcomer queues behind the waiters (room in the queue), it does not take a slot.
    expect(gate.acquire(admitting(() => order.push(99))).kind).toBe('queued');
    for (let i = 0; i < 4; i++) permits[i]!.release(); // 6 -> 2 in the engine: still no free slot
    expect(order).toEqual([]);
    expect(gate.inEngine).toBe(2);
    permits[4]!.release(); // 1 < 2: the head waiter goes in, and the engine is at the new N again
    expect(order).toEqual([0]);
    expect([gate.inEngine, gate.queued]).toEqual([2, 3]);
  });

  it('lowering Q drops no waiter: newcomers are refused until the queue is below the new Q', () => {
    const { gate, permits, order } = filled(1, 6, 5);
    gate.setLimits(1, 2);
    expect(gate.queued).toBe(5);
    expect(gate.acquire(admitting(() => {})).kind).toBe('rejected');
    for (let i = 0; i < 3; i++) permits.shift()!.release();
    expect(order).toEqual([0, 1, 2]);
    expect(gate.queued).toBe(2);
    expect(gate.acquire(admitting(() => {})).kind).toBe('rejected'); // 2 waiting, Q = 2: full
    permits.shift()!.release();
    expect(gate.acquire(admitting(() => order.push(7))).kind).toBe('queued');
    while (permits.length) permits.shift()!.release();
    expect(order).toEqual([0, 1, 2, 3, 4, 7]); // every waiter admitted, in arrival order
  });

  it('turning admission off (N = Infinity) admits every queued call at once, and everything after', () => {
    const { gate, order } = filled(2, 4, 4);
    gate.setLimits(Infinity, 0);
    expect(order).toEqual([0, 1, 2, 3]);
    expect([gate.inEngine, gate.queued]).toEqual([6, 0]);
    for (let i = 0; i < 1000; i++) expect(gate.acquire(admitting(() => {})).kind).toBe('admitted');
  });

  it('turning admission on with more calls in the engine than N behaves like lowering N', () => {
    const gate = new AdmissionGate(Infinity, 0);
    const permits: Permit[] = [];
    for (let i = 0; i < 10; i++) {
      const a = gate.acquire(admitting(() => {}));
      if (a.kind === 'admitted') permits.push(a.permit);
    }
    gate.setLimits(4, 2);
    expect([gate.inEngine, gate.queued]).toEqual([10, 0]);
    const admitted: string[] = [];
    expect(gate.acquire(admitting(() => admitted.push('a'))).kind).toBe('queued');
    expect(gate.acquire(admitting(() => admitted.push('b'))).kind).toBe('queued');
    expect(gate.acquire(admitting(() => {})).kind).toBe('rejected');
    for (let i = 0; i < 6; i++) permits[i]!.release();
    expect(admitted).toEqual([]);
    permits[6]!.release();
    expect(admitted).toEqual(['a']);
    expect([gate.inEngine, gate.queued]).toEqual([4, 1]);
  });

  it('takes a change made from inside an admission callback: the hand-off goes on under the new N, in order', () => {
    let changes = 0;
    const gate = new AdmissionGate(1, 8);
    gate.subscribe(() => changes++);
    const held = gate.acquire(admitting(() => {}));
    const order: number[] = [];
    // The first waiter, once admitted, raises N to 4 while the gate is still handing its slot over.
    gate.acquire(admitting(() => (order.push(0), gate.setLimits(4, 8))));
    for (const id of [1, 2, 3, 4]) gate.acquire(admitting(() => order.push(id)));
    if (held.kind !== 'admitted') throw new Error('expected admitted');
    changes = 0;
    held.permit.release();
    expect(order).toEqual([0, 1, 2, 3]);
    expect([gate.inEngine, gate.queued, gate.limit]).toEqual([4, 1, 4]);
    expect(changes).toBe(1); // one notification for the whole hand-off
  });

  it('tells its listener about a change, and refuses limits the constructor refuses', () => {
    let changes = 0;
    const gate = new AdmissionGate(2, 2);
    gate.subscribe(() => changes++);
    gate.setLimits(3, 4);
    expect(changes).toBe(1);
    expect([gate.limit, gate.queueLimit]).toEqual([3, 4]);
    expect(() => gate.setLimits(0, 2)).toThrow(RangeError);
    expect(() => gate.setLimits(2, -1)).toThrow(RangeError);
    expect([gate.limit, gate.queueLimit]).toEqual([3, 4]);
  });

  // Hammer with live changes: random arrive / release / cancel / setLimits, checking the
  // transient-state invariants after every step.
  it.each([7, 8, 99, 2026, 31337])('keeps the live-change invariants and FIFO under random interleavings (seed %i)', (seed) => {
    const random = mulberry32(seed);
    const randomLimit = (): number => (random() < 0.1 ? Infinity : 1 + Math.floor(random() * 10));
    const randomQueue = (): number => 2 + Math.floor(random() * 8);
    let limit = randomLimit();
    let queueLimit = limit === Infinity ? 0 : randomQueue();
    const gate = new AdmissionGate(limit, queueLimit);
    const holding: Permit[] = [];
    const waiting: { id: number; ticket: QueueTicket }[] = [];
    const admissionOrder: number[] = [];
    const queueOrder: number[] = [];
    let nextId = 0;
    let changes = 0;
    let lowered = 0;
    for (let step = 0; step < 20_000; step++) {
      const before = { inEngine: gate.inEngine, queued: gate.queued };
      const r = random();
      if (r < 0.45) {
        const id = nextId++;
        const admission = gate.acquire(
          admitting((permit) => {
            admissionOrder.push(id);
            waiting.splice(
              waiting.findIndex((w) => w.id === id),
              1,
            );
            holding.push(permit);
          }),
        );
        if (admission.kind === 'admitted') {
          expect(before.inEngine, 'admitted only below the limit').toBeLessThan(limit);
          expect(before.queued, 'admitted only with nobody waiting').toBe(0);
          holding.push(admission.permit);
        } else if (admission.kind === 'queued') {
          expect(before.queued, 'queued only below the queue limit').toBeLessThan(queueLimit);
          waiting.push({ id, ticket: admission.ticket });
          queueOrder.push(id);
        } else {
          expect(gate.inEngine).toBeGreaterThanOrEqual(limit);
          expect(gate.queued).toBeGreaterThanOrEqual(queueLimit);
        }
      } else if (r < 0.8 && holding.length) {
        holding.splice(Math.floor(random() * holding.length), 1)[0]!.release();
      } else if (r < 0.95 && waiting.length) {
        const { id, ticket } = waiting.splice(Math.floor(random() * waiting.length), 1)[0]!;
        expect(ticket.cancel()).toBe(true);
        queueOrder.splice(queueOrder.indexOf(id), 1);
      } else {
        const newLimit = randomLimit();
        const newQueue = newLimit === Infinity ? 0 : randomQueue();
        if (newLimit < gate.inEngine || newQueue < gate.queued) lowered++;
        limit = newLimit;
        queueLimit = newQueue;
        gate.setLimits(limit, queueLimit);
        changes++;
        // Nothing in the engine is cancelled, nothing queued is dropped: only admissions move calls.
        expect(gate.inEngine + gate.queued).toBe(before.inEngine + before.queued);
      }
      expect(gate.inEngine).toBe(holding.length);
      expect(gate.queued).toBe(waiting.length);
      expect([gate.limit, gate.queueLimit]).toEqual([limit, queueLimit]);
      if (gate.queued > 0) expect(gate.inEngine, 'a waiter implies no free slot').toBeGreaterThanOrEqual(limit);
      // Above a limit only after a lowering, and then never growing.
      if (gate.inEngine > limit) expect(gate.inEngine).toBeLessThanOrEqual(before.inEngine);
      if (gate.queued > queueLimit) expect(gate.queued).toBeLessThanOrEqual(before.queued);
    }
    expect(admissionOrder).toEqual(queueOrder.slice(0, admissionOrder.length));
    expect(changes).toBeGreaterThan(100);
    expect(lowered).toBeGreaterThan(10);
  });
});

describe('AdmissionGate first-token limit (F)', () => {
  it('admits no more than F calls that have not had their first token, queueing the rest although slots are free', () => {
    const gate = new AdmissionGate(8, 4, 2);
    const kinds = Array.from({ length: 4 }, () => gate.acquire(admitting(() => {})).kind);
    expect(kinds).toEqual(['admitted', 'admitted', 'queued', 'queued']);
    expect([gate.inEngine, gate.awaitingFirstToken, gate.queued, gate.hasRoom]).toEqual([2, 2, 2, false]);
  });

  it("hands the head waiter a slot when a call's first token passes, and that call keeps its slot", () => {
    const gate = new AdmissionGate(8, 4, 1);
    const first = gate.acquire(admitting(() => {}));
    const admitted: Permit[] = [];
    gate.acquire(admitting((p) => admitted.push(p)));
    if (first.kind !== 'admitted') throw new Error('first call should be admitted');
    first.permit.firstToken();
    expect(admitted).toHaveLength(1);
    expect([gate.inEngine, gate.awaitingFirstToken, gate.queued]).toEqual([2, 1, 0]);
    first.permit.firstToken(); // idempotent
    expect(gate.awaitingFirstToken).toBe(1);
  });

  it('frees both places when a call ends before its first token, and only the slot after it', () => {
    const gate = new AdmissionGate(4, 2, 4);
    const a = gate.acquire(admitting(() => {}));
    const b = gate.acquire(admitting(() => {}));
    if (a.kind !== 'admitted' || b.kind !== 'admitted') throw new Error('both should be admitted');
    a.permit.release();
    expect([gate.inEngine, gate.awaitingFirstToken]).toEqual([1, 1]);
    b.permit.firstToken();
    b.permit.release();
    b.permit.firstToken(); // after release: nothing
    expect([gate.inEngine, gate.awaitingFirstToken]).toEqual([0, 0]);
  });

  it('queues behind N as before when F is off (Infinity) or not the tighter limit', () => {
    const gate = new AdmissionGate(2, 2);
    expect(gate.firstTokenLimit).toBe(Infinity);
    const kinds = Array.from({ length: 3 }, () => gate.acquire(admitting(() => {})).kind);
    expect(kinds).toEqual(['admitted', 'admitted', 'queued']);
  });

  it('raising F admits queued calls at once; a limit below 1 is refused', () => {
    const gate = new AdmissionGate(8, 4, 1);
    gate.acquire(admitting(() => {}));
    let admittedLater = 0;
    for (let i = 0; i < 3; i++) gate.acquire(admitting(() => admittedLater++));
    gate.setLimits(8, 4, 3);
    expect([admittedLater, gate.awaitingFirstToken, gate.queued]).toEqual([2, 3, 1]);
    expect(() => gate.setLimits(8, 4, 0)).toThrow(/firstTokenLimit must be >= 1/);
    expect(() => new AdmissionGate(8, 4, Number.NaN)).toThrow(RangeError);
  });

  it.each([1, 42, 2026])('keeps both caps exact and FIFO under random arrive / first token / release / cancel (seed %i)', (seed) => {
    const random = mulberry32(seed);
    const N = 6;
    const F = 3;
    const Q = 5;
    const gate = new AdmissionGate(N, Q, F);
    const holding: { permit: Permit; awaiting: boolean }[] = [];
    const waiting: { id: number; ticket: QueueTicket }[] = [];
    const admissionOrder: number[] = [];
    const queueOrder: number[] = [];
    let nextId = 0;
    let firstTokens = 0;
    for (let step = 0; step < 20_000; step++) {
      const r = random();
      if (r < 0.4) {
        const id = nextId++;
        const admission = gate.acquire(
          admitting((permit) => {
            admissionOrder.push(id);
            waiting.splice(
              waiting.findIndex((w) => w.id === id),
              1,
            );
            holding.push({ permit, awaiting: true });
          }),
        );
        if (admission.kind === 'admitted') holding.push({ permit: admission.permit, awaiting: true });
        else if (admission.kind === 'queued') {
          waiting.push({ id, ticket: admission.ticket });
          queueOrder.push(id);
        }
      } else if (r < 0.65 && holding.some((h) => h.awaiting)) {
        const candidates = holding.filter((h) => h.awaiting);
        const chosen = candidates[Math.floor(random() * candidates.length)]!;
        chosen.awaiting = false;
        chosen.permit.firstToken();
        firstTokens++;
      } else if (r < 0.9 && holding.length) {
        holding.splice(Math.floor(random() * holding.length), 1)[0]!.permit.release();
      } else if (waiting.length) {
        const { id, ticket } = waiting.splice(Math.floor(random() * waiting.length), 1)[0]!;
        expect(ticket.cancel()).toBe(true);
        queueOrder.splice(queueOrder.indexOf(id), 1);
      }
      expect(gate.inEngine).toBe(holding.length);
      expect(gate.awaitingFirstToken).toBe(holding.filter((h) => h.awaiting).length);
      expect(gate.queued).toBe(waiting.length);
      expect(gate.inEngine).toBeLessThanOrEqual(N);
      expect(gate.awaitingFirstToken).toBeLessThanOrEqual(F);
      expect(gate.queued).toBeLessThanOrEqual(Q);
      if (gate.queued > 0) expect(gate.inEngine >= N || gate.awaitingFirstToken >= F, 'a waiter implies no room').toBe(true);
    }
    expect(admissionOrder).toEqual(queueOrder.slice(0, admissionOrder.length));
    expect(firstTokens).toBeGreaterThan(1000);
  });
});

describe('AdmissionGate priorities and tenants', () => {
  function full(limit: number, queueLimit: number) {
    const gate = new AdmissionGate(limit, queueLimit);
    const permits: Permit[] = [];
    for (let i = 0; i < limit; i++) {
      const a = gate.acquire(admitting(() => {}));
      if (a.kind === 'admitted') permits.push(a.permit);
    }
    return { gate, permits };
  }

  it('hands freed slots to the most urgent waiter first', () => {
    const { gate, permits } = full(1, 4);
    const admitted: string[] = [];
    const queue = (name: string, priority: number) =>
      gate.acquire(
        admitting(() => admitted.push(name)),
        { priority, tenant: '' },
      );
    queue('batch', 5);
    queue('interactive', 0);
    queue('normal', 2);
    permits[0]!.release();
    expect(admitted).toEqual(['interactive']);
  });

  it('displaces the newest call of the lowest priority when full: it is told once, and N + Q stays exact', () => {
    const { gate } = full(2, 2);
    const told: string[] = [];
    const queue = (name: string, priority: number) =>
      gate.acquire(
        admitting(
          () => told.push(`${name} admitted`),
          () => told.push(`${name} displaced`),
        ),
        { priority, tenant: '' },
      );
    expect(queue('low1', 5).kind).toBe('queued');
    expect(queue('low2', 5).kind).toBe('queued');
    expect(queue('same', 5).kind).toBe('rejected'); // not more urgent: refused
    const high = queue('high', 0);
    expect(high.kind).toBe('queued');
    expect(told).toEqual(['low2 displaced']);
    expect(gate.queued).toBe(2);
    expect(gate.inEngine).toBe(2);
    expect(queue('high2', 0).kind).toBe('queued'); // low1 goes too
    expect(queue('high3', 0).kind).toBe('rejected'); // nothing below 0 left
    expect(told).toEqual(['low2 displaced', 'low1 displaced']);
    expect(gate.queued).toBe(2);
  });

  it('a displaced call has left the queue: cancelling its ticket is a no-op', () => {
    const { gate } = full(1, 2);
    const low = gate.acquire(
      admitting(() => {}),
      { priority: 9, tenant: '' },
    );
    gate.acquire(
      admitting(() => {}),
      { priority: 9, tenant: '' },
    );
    gate.acquire(
      admitting(() => {}),
      { priority: 0, tenant: '' },
    );
    expect(low.kind).toBe('queued');
    const second = gate.acquire(
      admitting(() => {}),
      { priority: 0, tenant: '' },
    );
    expect(second.kind).toBe('queued');
    if (low.kind === 'queued') expect(low.ticket.cancel()).toBe(false);
    expect(gate.queued).toBe(2);
  });

  it('with no queue (Q = 0) refuses even the most urgent call', () => {
    const { gate } = full(1, 0);
    expect(
      gate.acquire(
        admitting(() => {}),
        { priority: -100, tenant: '' },
      ).kind,
    ).toBe('rejected');
  });

  it('lets a tenant that holds few places push out the newest call of one that holds many', () => {
    const { gate } = full(1, 3);
    const displaced: string[] = [];
    const queue = (name: string, tenant: string) =>
      gate.acquire(
        admitting(
          () => {},
          () => displaced.push(name),
        ),
        { priority: 0, tenant },
      );
    queue('n1', 'noisy');
    queue('n2', 'noisy');
    queue('n3', 'noisy');
    expect(queue('p1', 'polite').kind).toBe('queued');
    expect(displaced).toEqual(['n3']);
    expect(queue('n4', 'noisy').kind).toBe('rejected');
  });

  // Hammer with classes: random arrivals of random priorities and tenants, releases, cancels.
  it.each([1, 2, 3, 42, 1234])('keeps N + Q exact and ends every waiter exactly once under random classes (seed %i)', (seed) => {
    const random = mulberry32(seed);
    const limit = 1 + Math.floor(random() * 6);
    const queueLimit = 2 + Math.floor(random() * 6);
    const gate = new AdmissionGate(limit, queueLimit, Infinity, 1 + Math.floor(random() * 4));
    const holding: Permit[] = [];
    const waiting = new Map<number, { ticket: QueueTicket; priority: number }>();
    const ends = new Map<number, number>();
    const end = (id: number): void => void ends.set(id, (ends.get(id) ?? 0) + 1);
    let nextId = 0;
    let displacedCount = 0;
    for (let step = 0; step < 20_000; step++) {
      const r = random();
      if (r < 0.55) {
        const id = nextId++;
        const priority = Math.floor(random() * 4);
        const tenant = `t${Math.floor(random() * 3)}`;
        const queuedBefore = [...waiting.values()].map((w) => w.priority);
        const admission = gate.acquire(
          admitting(
            (permit) => {
              end(id);
              expect(waiting.delete(id)).toBe(true);
              holding.push(permit);
            },
            () => {
              end(id);
              displacedCount++;
              const victim = waiting.get(id);
              expect(victim).toBeDefined();
              // Only a call no more urgent than the arrival is ever displaced.
              expect(victim!.priority).toBeGreaterThanOrEqual(priority);
              waiting.delete(id);
            },
          ),
          { priority, tenant },
        );
        if (admission.kind === 'admitted') {
          end(id);
          holding.push(admission.permit);
        } else if (admission.kind === 'queued') waiting.set(id, { ticket: admission.ticket, priority });
        else {
          end(id);
          expect(gate.queued).toBe(queueLimit);
          // Refused only when nothing queued is less urgent than the arrival.
          expect(queuedBefore.every((p) => p <= priority)).toBe(true);
        }
      } else if (r < 0.85 && holding.length) {
        holding.splice(Math.floor(random() * holding.length), 1)[0]!.release();
      } else if (waiting.size) {
        const ids = [...waiting.keys()];
        const id = ids[Math.floor(random() * ids.length)]!;
        expect(waiting.get(id)!.ticket.cancel()).toBe(true);
        waiting.delete(id);
        end(id);
      }
      expect(gate.inEngine).toBe(holding.length);
      expect(gate.queued).toBe(waiting.size);
      expect(gate.inEngine).toBeLessThanOrEqual(limit);
      expect(gate.queued).toBeLessThanOrEqual(queueLimit);
      if (gate.queued > 0) expect(gate.inEngine).toBe(limit);
    }
    for (const id of waiting.keys()) expect(ends.has(id)).toBe(false);
    for (const [, count] of ends) expect(count).toBe(1);
    expect(ends.size + waiting.size).toBe(nextId);
    expect(displacedCount).toBeGreaterThan(0);
  });
});
