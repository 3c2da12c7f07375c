import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { WorkerCredit, type CreditReport } from '../../../../src/frontend/routing/worker-credit.js';

let sequence = 0;
const report = (admitNow: number | undefined, occupancy = 0, fields: Partial<CreditReport> = {}): CreditReport => ({
  admitNow,
  occupancy,
  sequence: ++sequence,
  timestampMs: 1000 + sequence,
  ...fields,
});

describe('a worker credit', () => {
  it.each([
    { name: 'no report yet: no credit state', steps: [], remaining: undefined },
    { name: 'a report without admit_now: no credit state', steps: [{ report: undefined }], remaining: undefined },
    { name: 'admit_now 3, nothing sent', steps: [{ report: 3 }], remaining: 3 },
    { name: 'each call sent spends one', steps: [{ report: 3 }, 'send', 'send'], remaining: 1 },
    { name: 'never below 0', steps: [{ report: 1 }, 'send', 'send', 'send'], remaining: 0 },
    { name: 'a call that ends gives nothing back before the next report', steps: [{ report: 1 }, 'send', 'end'], remaining: 0 },
    { name: 'the next report replaces the count', steps: [{ report: 1 }, 'send', { report: 2, occupancy: 1 }], remaining: 2 },
    { name: 'admit_now 0 with nothing sent', steps: [{ report: 0 }], remaining: 0 },
  ] as const)('$name', ({ steps, remaining }) => {
    const credit = new WorkerCredit();
    const open: (() => void)[] = [];
    for (const step of steps) {
      if (step === 'send') open.push(credit.send());
      else if (step === 'end') open.shift()?.();
      else credit.report(report(step.report, 'occupancy' in step ? step.occupancy : 0));
    }
    expect(credit.remaining).toBe(remaining);
  });

  it('counts a call sent before a report that did not see it (in transit) as spent', () => {
    const credit = new WorkerCredit();
    credit.report(report(4, 0));
    credit.send();
    credit.send();
    // Taken before our two calls arrived: it still says 4 free and 0 held.
    credit.report(report(4, 0));
    expect(credit.remaining).toBe(2);
    // The next one saw them both: 2 free, 2 held, all of them ours.
    credit.report(report(2, 2));
    expect(credit.remaining).toBe(2);
  });

  it('gives back an unseen call once it ends (its answer came: it was seen and is gone)', () => {
    const credit = new WorkerCredit();
    credit.report(report(2, 0));
    const end = credit.send();
    credit.report(report(2, 0));
    expect(credit.remaining).toBe(1);
    end();
    end(); // idempotent
    expect(credit.remaining).toBe(2);
  });

  it('ignores a report older than the one applied, and takes a restarted sidecar (newer clock, lower sequence)', () => {
    const credit = new WorkerCredit();
    expect(credit.report({ admitNow: 1, occupancy: 0, sequence: 10, timestampMs: 5000 })).toBe(true);
    expect(credit.report({ admitNow: 8, occupancy: 0, sequence: 9, timestampMs: 4990 })).toBe(false);
    expect(credit.remaining).toBe(1);
    // The same snapshot's other rank (equal sequence) applies.
    expect(credit.report({ admitNow: 1, occupancy: 0, sequence: 10, timestampMs: 5000 })).toBe(true);
    expect(credit.report({ admitNow: 6, occupancy: 0, sequence: 1, timestampMs: 9000 })).toBe(true);
    expect(credit.remaining).toBe(6);
  });

  it('a reconnected push stream (its updates counted again from 1) applies by its newer clock', () => {
    const credit = new WorkerCredit();
    credit.report({ admitNow: 0, occupancy: 4, sequence: 500, timestampMs: 10_000 });
    credit.report({ admitNow: 3, occupancy: 1, sequence: 1, timestampMs: 10_200 });
    expect(credit.remaining).toBe(3);
  });

  it('with several frontends, the others calls hide ours: the estimate may run over (the worker then refuses)', () => {
    // Worker: 4 slots. Frontend A has 2 calls in transit when a report is taken that saw 2 of B's.
    const a = new WorkerCredit();
    a.report(report(4, 0));
    a.send();
    a.send();
    a.report(report(2, 2)); // B's two, not A's
    // A believes its two were seen (occupancy 2 covers them) and counts 2 credits; the truth is 0.
    expect(a.remaining).toBe(2);
  });

  it('randomized: with one frontend and reports taken at any moment, it never credits more than the worker has free', () => {
    const random = mulberry32(7);
    for (let trial = 0; trial < 100; trial++) {
      const capacity = 1 + Math.floor(random() * 6);
      const credit = new WorkerCredit();
      // Calls: sent (in transit) -> arrived (held by the worker) -> answered (worker freed the place) -> ended here.
      const inTransit: (() => void)[] = [];
      const held: (() => void)[] = [];
      const answering: (() => void)[] = [];
      const take = () => credit.report(report(capacity - held.length, held.length));
      take();
      for (let step = 0; step < 200; step++) {
        const r = random();
        if (r < 0.3 && (credit.remaining ?? 0) > 0) inTransit.push(credit.send());
        else if (r < 0.5 && inTransit.length > 0) held.push(inTransit.shift()!);
        else if (r < 0.65 && held.length > 0) answering.push(held.shift()!);
        else if (r < 0.8 && answering.length > 0) answering.shift()!();
        else take();
        // Free at the worker, counting the calls on their way to it.
        const free = capacity - held.length - inTransit.length;
        expect(credit.remaining!).toBeLessThanOrEqual(Math.max(0, free));
        expect(held.length + inTransit.length).toBeLessThanOrEqual(capacity);
      }
    }
  });
});
