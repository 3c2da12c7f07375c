import { describe, expect, it } from 'vitest';
import { AdmissionGate, type Permit, type QueueTicket } from '../../../../src/sidecar/admission/gate.js';
import { KvLedger, UNDECODED_PROMPT_TOKENS, type CallCost, type KvGeometry } from '../../../../src/sidecar/admission/kv-ledger.js';
import { OutputLengths } from '../../../../src/sidecar/admission/output-lengths.js';
import { PrefillLearner } from '../../../../src/sidecar/admission/prefill-model.js';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { admitting } from '../../../support/admitting.js';

function geometry(totalBlocks: number | undefined, blockSize = 16, used?: () => number | undefined): KvGeometry {
  return { totalBlocks: () => totalBlocks, blockSize: () => blockSize, usedBlocks: () => used?.() };
}

function ledgerWith(totalBlocks: number | undefined, options: { budget?: number; used?: () => number | undefined } = {}) {
  let now = 0;
  const prefill = new PrefillLearner();
  const ledger = new KvLedger(
    geometry(totalBlocks, 16, options.used),
    prefill,
    new OutputLengths(),
    () => now,
    () => options.budget ?? Infinity,
  );
  return { ledger, prefill, advance: (ms: number) => (now += ms) };
}

describe('KvLedger', () => {
  it('reserves ceil((prompt + expected output) / block size) per call, and counts prefill until the first token', () => {
    const { ledger, prefill, advance } = ledgerWith(100);
    const cost = ledger.costOf(0, 100, 60); // 160 tokens: 10 blocks
    expect(cost.blocks).toBe(10);
    ledger.take(cost);
    expect([ledger.reservedBlocks(0), ledger.prefillTokensAhead(0), ledger.freeBlocks(0)]).toEqual([10, 100, 90]);
    advance(40);
    ledger.firstToken(cost);
    expect([ledger.reservedBlocks(0), ledger.prefillTokensAhead(0)]).toEqual([10, 0]);
    expect(prefill.samples).toBe(1);
    advance(60);
    ledger.give(cost);
    expect([ledger.reservedBlocks(0), ledger.freeBlocks(0), ledger.meanHoldMs]).toEqual([0, 100, 100]);
  });

  it("teaches the prefill model the batch a call's first token came with, not only what was ahead of it", () => {
    const samples: [number, number][] = [];
    const learner = { sample: (tokens: number, ms: number) => samples.push([tokens, ms]) } as unknown as PrefillLearner;
    let now = 0;
    const ledger = new KvLedger(geometry(undefined), learner, new OutputLengths(), () => now);
    const first = ledger.costOf(0, 100, 0);
    const second = ledger.costOf(0, 300, 0);
    ledger.take(first);
    ledger.take(second);
    now = 50; // one step prefills both
    ledger.firstToken(first);
    ledger.firstToken(second);
    expect(samples).toEqual([
      [400, 50], // the first admitted waited for the whole batch, not for 100 tokens
      [400, 50],
    ]);
  });

  it('counts a prompt it could not read at a conservative size', () => {
    const { ledger } = ledgerWith(100);
    expect(ledger.costOf(0, undefined, undefined).promptTokens).toBe(UNDECODED_PROMPT_TOKENS);
  });

  it("fits a call while its blocks fit beside the larger of ours and the engine's used blocks; an empty rank takes anything", () => {
    let engineUsed: number | undefined;
    const { ledger } = ledgerWith(20, { used: () => engineUsed });
    const big = ledger.costOf(0, 16 * 30, 0);
    expect(ledger.fits(big)).toBe(true); // 30 blocks > 20, but nothing is in the engine
    const a = ledger.costOf(0, 16 * 8, 0);
    ledger.take(a);
    expect(ledger.fits(ledger.costOf(0, 16 * 12, 0))).toBe(true);
    expect(ledger.fits(ledger.costOf(0, 16 * 13, 0))).toBe(false);
    engineUsed = 15; // the engine says more is used than we reserved (prefix cache, other clients)
    expect(ledger.fits(ledger.costOf(0, 16 * 6, 0))).toBe(false);
    expect(ledger.fits(ledger.costOf(0, 16 * 5, 0))).toBe(true);
  });

  it('holds a prompt beyond the prefill budget while others are in prefill', () => {
    const { ledger } = ledgerWith(undefined, { budget: 1000 });
    const a = ledger.costOf(0, 800, 0);
    ledger.take(a);
    expect(ledger.fits(ledger.costOf(0, 300, 0))).toBe(false);
    expect(ledger.fits(ledger.costOf(0, 200, 0))).toBe(true);
    ledger.firstToken(a);
    expect(ledger.fits(ledger.costOf(0, 3000, 0))).toBe(true); // nothing in prefill: one step may take it
  });

  it('keeps each rank apart', () => {
    const { ledger } = ledgerWith(10);
    ledger.take(ledger.costOf(1, 16 * 9, 0));
    expect([ledger.reservedBlocks(0), ledger.reservedBlocks(1)]).toEqual([0, 9]);
    expect(ledger.fits(ledger.costOf(0, 16 * 9, 0))).toBe(true);
  });

  it('moves a call through its states once, whatever calls come twice or out of order', () => {
    const { ledger } = ledgerWith(100);
    const cost = ledger.costOf(0, 32, 0);
    ledger.queued(cost);
    ledger.queued(cost);
    expect(ledger.queuedBlocks(0)).toBe(2);
    ledger.take(cost);
    ledger.take(cost);
    ledger.unqueued(cost);
    expect([ledger.queuedBlocks(0), ledger.reservedBlocks(0)]).toEqual([0, 2]);
    ledger.give(cost);
    ledger.give(cost);
    ledger.firstToken(cost);
    expect([ledger.reservedBlocks(0), ledger.prefillTokensAhead(0)]).toEqual([0, 0]);
  });
});

/**
 * The gate with the ledger as its budget, under random arrive / first token / release (end or
 * engine error) / cancel (client gone, deadline, queue timeout) / displacement (urgent arrivals):
 * the ledger's counts equal the sums over the calls in each state, never go negative, come back
 * to zero, and N + Q stays exact.
 */
describe('AdmissionGate with a KvLedger budget', () => {
  for (const seed of [1, 7, 2026]) {
    it(`keeps the budget exact and N + Q exact under random sequences (seed ${seed})`, () => {
      const random = mulberry32(seed);
      const { ledger } = ledgerWith(64, { budget: 600 });
      const limit = 6;
      const queueLimit = 4;
      const gate = new AdmissionGate(limit, queueLimit);
      gate.setBudget(ledger);
      interface Call {
        cost: CallCost;
        permit?: Permit | undefined;
        ticket?: QueueTicket | undefined;
        firstDone: boolean;
        done: boolean;
      }
      const calls: Call[] = [];
      const live = (): Call[] => calls.filter((c) => !c.done);
      for (let step = 0; step < 4000; step++) {
        const r = random();
        if (r < 0.35) {
          const call: Call = { cost: ledger.costOf(0, 1 + Math.floor(random() * 400), Math.floor(random() * 200)), firstDone: false, done: false };
          const priority = random() < 0.2 ? -1 : 0;
          const admission = gate.acquire(
            admitting(
              (permit) => {
                call.permit = permit;
                call.ticket = undefined;
              },
              () => {
                call.done = true;
                call.ticket = undefined;
              },
            ),
            { priority, tenant: '' },
            call.cost,
          );
          if (admission.kind === 'rejected') continue;
          if (admission.kind === 'admitted') call.permit = admission.permit;
          else call.ticket = admission.ticket;
          calls.push(call);
        } else {
          const candidates = live();
          if (candidates.length === 0) continue;
          const call = candidates[Math.floor(random() * candidates.length)]!;
          if (call.permit) {
            if (!call.firstDone && random() < 0.6) {
              call.permit.firstToken();
              call.firstDone = true;
            } else {
              call.permit.release(); // done, or an engine error before its first token
              call.done = true;
            }
          } else if (call.ticket && random() < 0.3) {
            call.ticket.cancel(); // client gone, deadline or queue timeout while queued
            call.done = true;
          }
        }
        // Invariants after every step.
        const inEngine = calls.filter((c) => !c.done && c.permit);
        const queued = calls.filter((c) => !c.done && !c.permit);
        expect(gate.inEngine).toBe(inEngine.length);
        expect(gate.queued).toBe(queued.length);
        expect(gate.inEngine).toBeLessThanOrEqual(limit);
        expect(gate.queued).toBeLessThanOrEqual(queueLimit);
        expect(ledger.reservedBlocks(0)).toBe(inEngine.reduce((sum, c) => sum + c.cost.blocks, 0));
        expect(ledger.prefillTokensAhead(0, false)).toBe(inEngine.filter((c) => !c.firstDone).reduce((sum, c) => sum + c.cost.promptTokens, 0));
        expect(ledger.queuedBlocks(0)).toBe(queued.reduce((sum, c) => sum + c.cost.blocks, 0));
        // Whoever waits is held by a count or by its cost: a freed slot never idles beside a fitting waiter.
        if (gate.queued > 0 && gate.inEngine < limit) expect(inEngine.length).toBeGreaterThan(0);
      }
      // Everything ends: the ledger comes back to zero.
      for (let i = 0; i < 100 && live().length > 0; i++) {
        for (const call of live()) {
          if (call.permit) {
            call.permit.release();
            call.done = true;
          } else if (call.ticket?.cancel()) call.done = true;
        }
      }
      expect([gate.inEngine, gate.queued, ledger.reservedBlocks(0), ledger.prefillTokensAhead(0), ledger.queuedBlocks(0)]).toEqual([0, 0, 0, 0, 0]);
    });
  }

  it('admits a queued call as soon as enough blocks are given back, in order', () => {
    const { ledger } = ledgerWith(10);
    const gate = new AdmissionGate(10, 4);
    gate.setBudget(ledger);
    const a = gate.acquire(
      admitting(() => {}),
      undefined,
      ledger.costOf(0, 16 * 6, 0),
    );
    const order: string[] = [];
    gate.acquire(
      admitting(() => order.push('b')),
      undefined,
      ledger.costOf(0, 16 * 6, 0),
    );
    gate.acquire(
      admitting(() => order.push('c')),
      undefined,
      ledger.costOf(0, 16 * 1, 0),
    ); // fits, but waits behind b
    expect([a.kind, gate.queued, order]).toEqual(['admitted', 2, []]);
    if (a.kind === 'admitted') a.permit.release();
    expect(order).toEqual(['b', 'c']);
  });
});
