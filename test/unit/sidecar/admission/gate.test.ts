import { describe, expect, it } from 'vitest';
import { AdmissionGate, type Permit, type QueueTicket } from '../../../../src/sidecar/admission/gate.js';
import { mulberry32 } from '../../../../src/platform/prng.js';

describe('AdmissionGate', () => {
  it('admits while a slot is free, queues Q more, rejects beyond', () => {
    const gate = new AdmissionGate(2, 2);
    const kinds = Array.from({ length: 6 }, () => gate.acquire(() => {}).kind);
    expect(kinds).toEqual(['admitted', 'admitted', 'queued', 'queued', 'rejected', 'rejected']);
    expect([gate.inEngine, gate.queued, gate.full]).toEqual([2, 2, true]);
  });

  it('hands a released slot to the head of the queue, in arrival order', () => {
    const gate = new AdmissionGate(1, 3);
    const order: number[] = [];
    const first = gate.acquire(() => {});
    const permits: Permit[] = [];
    for (const id of [1, 2, 3]) gate.acquire((p) => (order.push(id), permits.push(p)));
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
    const held = gate.acquire(() => {});
    const admittedFromQueue: string[] = [];
    gate.acquire(() => {
      admittedFromQueue.push('queued');
      // Re-entrant arrival while the slot is being handed over: it must queue, not take a slot.
      expect(gate.acquire(() => admittedFromQueue.push('late')).kind).toBe('queued');
    });
    if (held.kind !== 'admitted') throw new Error('expected admitted');
    held.permit.release();
    expect(admittedFromQueue).toEqual(['queued']);
    expect([gate.inEngine, gate.queued]).toEqual([1, 1]);
  });

  it('releases a slot only once however often release() is called', () => {
    const gate = new AdmissionGate(2, 2);
    const a = gate.acquire(() => {});
    if (a.kind !== 'admitted') throw new Error('expected admitted');
    a.permit.release();
    a.permit.release();
    a.permit.release();
    expect(gate.inEngine).toBe(0);
    expect(a.permit.released).toBe(true);
  });

  it('removes a cancelled waiter at once, and cancel after admission is a no-op', () => {
    const gate = new AdmissionGate(1, 3);
    const held = gate.acquire(() => {});
    const admitted: string[] = [];
    const a = gate.acquire(() => admitted.push('a'));
    const b = gate.acquire(() => admitted.push('b'));
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
    const held = gate.acquire(() => {});
    let admittedCount = 0;
    for (let i = 0; i < 50_000; i++) gate.acquire((p) => (admittedCount++, p.release()));
    if (held.kind !== 'admitted') throw new Error('expected admitted');
    held.permit.release();
    expect(admittedCount).toBe(50_000);
    expect([gate.inEngine, gate.queued]).toEqual([0, 0]);
  });

  it('with an infinite limit admits everything and never queues (admission off)', () => {
    const gate = new AdmissionGate(Infinity, 0);
    for (let i = 0; i < 10_000; i++) expect(gate.acquire(() => {}).kind).toBe('admitted');
    expect(gate.inEngine).toBe(10_000);
  });

  it('refuses a limit below 1 or a negative queue', () => {
    expect(() => new AdmissionGate(0, 2)).toThrow(RangeError);
    expect(() => new AdmissionGate(1, -1)).toThrow(RangeError);
  });

  it('tells its listener about every change', () => {
    let changes = 0;
    const gate = new AdmissionGate(1, 1, { onChange: () => changes++ });
    const a = gate.acquire(() => {});
    gate.acquire(() => {});
    gate.acquire(() => {}); // rejected: no change
    expect(changes).toBe(2);
    if (a.kind === 'admitted') a.permit.release();
    expect(changes).toBe(3);
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
        const admission = gate.acquire((permit) => {
          admissionOrder.push(id);
          const at = waiting.findIndex((w) => w.id === id);
          waiting.splice(at, 1);
          holding.push(permit);
        });
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
