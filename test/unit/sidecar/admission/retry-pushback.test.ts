/** The retry pushback: fixed, and the adaptive estimate from the gate and the time calls hold a slot, on a fake clock. */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { PUSHBACK_JITTER, RetryPushback, SLOT_TIME_DECAY_MS, type PushbackGateView } from '../../../../src/sidecar/admission/retry-pushback.js';

const ADAPTIVE = { retryPushbackMode: 'adaptive', retryPushbackMs: 250, retryPushbackMinMs: 100, retryPushbackMaxMs: 10_000 } as const;

function setup(settings: ConstructorParameters<typeof RetryPushback>[0] = ADAPTIVE, random = mulberry32(1)) {
  const clock = { now: 0 };
  const gate: { -readonly [K in keyof PushbackGateView]: number } = { inEngine: 8, queued: 0, limit: 8, awaitingFirstToken: 0, firstTokenLimit: Infinity };
  const pushback = new RetryPushback(settings, gate, () => clock.now, random);
  return { clock, gate, pushback };
}

describe('RetryPushback', () => {
  it('fixed: always --retry-pushback-ms, whatever the load or the durations', () => {
    const { gate, pushback } = setup({ ...ADAPTIVE, retryPushbackMode: 'fixed', retryPushbackMs: 250 });
    pushback.slotHeld(5000);
    gate.queued = 16;
    expect(pushback.estimateMs()).toBe(250);
    expect(Array.from({ length: 50 }, () => pushback.nextMs())).toEqual(Array.from({ length: 50 }, () => 250));
  });

  it('adaptive, before any call has ended: --retry-pushback-ms stands in, within the bounds', () => {
    expect(setup().pushback.estimateMs()).toBe(250);
    expect(setup({ ...ADAPTIVE, retryPushbackMs: 50 }).pushback.estimateMs()).toBe(100);
    expect(setup({ ...ADAPTIVE, retryPushbackMs: 60_000 }).pushback.estimateMs()).toBe(10_000);
  });

  it('adaptive: (queued + 1) / N x the mean time a call holds a slot', () => {
    const { gate, pushback } = setup();
    for (const ms of [800, 1200, 1000]) pushback.slotHeld(ms); // same instant: a plain mean, 1000
    expect(pushback.meanSlotMs).toBe(1000);
    gate.queued = 0;
    expect(pushback.estimateMs()).toBe(125); // one slot of 8 frees every 1000/8 ms
    gate.queued = 15;
    expect(pushback.estimateMs()).toBe(2000); // 16 frees ahead of a newcomer
    gate.limit = 4;
    gate.inEngine = 4;
    expect(pushback.estimateMs()).toBe(4000);
  });

  it('adaptive after N was lowered: the calls above the new N must leave first', () => {
    const { gate, pushback } = setup();
    pushback.slotHeld(1000);
    Object.assign(gate, { limit: 4, inEngine: 8, queued: 3 });
    // 4 above N + 3 queued + 1, with 8 calls freeing slots: (4 + 3 + 1) x 1000 / 8
    expect(pushback.estimateMs()).toBe(1000);
  });

  it('adaptive: bounded by --retry-pushback-min-ms and --retry-pushback-max-ms', () => {
    const { gate, pushback } = setup();
    pushback.slotHeld(10);
    expect(pushback.estimateMs()).toBe(100);
    pushback.slotHeld(10_000_000);
    gate.queued = 16;
    expect(pushback.estimateMs()).toBe(10_000);
  });

  it('adaptive: the mean follows the engine over seconds: older durations fade with time, not with the count of calls', () => {
    const { clock, pushback } = setup();
    for (let i = 0; i < 1000; i++) pushback.slotHeld(100); // a thousand short calls...
    clock.now += 10 * SLOT_TIME_DECAY_MS; // ...100 s ago: together they weigh 1000 x e^-10, about 0.05
    pushback.slotHeld(2000); // one long call now outweighs them
    expect(pushback.meanSlotMs!).toBeGreaterThan(1800);
    // Many calls at the same instant weigh the same, however many there are.
    const { pushback: even } = setup();
    for (let i = 0; i < 10; i++) even.slotHeld(100);
    for (let i = 0; i < 10; i++) even.slotHeld(300);
    expect(even.meanSlotMs).toBe(200);
    // A duration SLOT_TIME_DECAY_MS old weighs 1/e of a fresh one.
    const { clock: c2, pushback: decayed } = setup();
    decayed.slotHeld(0);
    c2.now += SLOT_TIME_DECAY_MS;
    decayed.slotHeld(1000);
    expect(decayed.meanSlotMs).toBeCloseTo(1000 / (1 + Math.exp(-1)), 6);
  });

  it('adaptive: spreads the answers uniformly within +-25% of the estimate, in whole ms', () => {
    const { gate, pushback } = setup();
    pushback.slotHeld(1000);
    gate.queued = 7; // estimate 1000
    const values = Array.from({ length: 4000 }, () => pushback.nextMs());
    expect(values.every(Number.isInteger)).toBe(true);
    expect(Math.min(...values)).toBeGreaterThanOrEqual(1000 * (1 - PUSHBACK_JITTER));
    expect(Math.max(...values)).toBeLessThanOrEqual(1000 * (1 + PUSHBACK_JITTER));
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    expect(mean).toBeGreaterThan(985);
    expect(mean).toBeLessThan(1015);
    // Spread: every 50 ms band of the 500 ms range is used, none holds more than twice its share.
    const bands = new Map<number, number>();
    for (const v of values) bands.set(Math.min(9, Math.floor((v - 750) / 50)), (bands.get(Math.min(9, Math.floor((v - 750) / 50))) ?? 0) + 1);
    expect(bands.size).toBe(10);
    for (const count of bands.values()) expect(count).toBeLessThan((2 * values.length) / 10);
  });

  it('adaptive: the jitter never leaves the bounds, and still spreads answers at a bound', () => {
    const { gate, pushback } = setup({ ...ADAPTIVE, retryPushbackMinMs: 900, retryPushbackMaxMs: 1100 });
    pushback.slotHeld(1_000_000);
    gate.queued = 16; // estimate far above the maximum
    const atMax = Array.from({ length: 1000 }, () => pushback.nextMs());
    expect(Math.max(...atMax)).toBeLessThanOrEqual(1100);
    expect(Math.min(...atMax)).toBeGreaterThanOrEqual(900);
    expect(new Set(atMax).size).toBeGreaterThan(50);
  });

  it('takes new settings at once (a live change)', () => {
    const { gate, pushback } = setup();
    pushback.slotHeld(1000);
    gate.queued = 7;
    pushback.configure({ ...ADAPTIVE, retryPushbackMaxMs: 400 });
    expect(pushback.estimateMs()).toBe(400);
    pushback.configure({ ...ADAPTIVE, retryPushbackMode: 'fixed', retryPushbackMs: 30 });
    expect(pushback.nextMs()).toBe(30);
  });
});

describe('RetryPushback.expectedWaitMs (who may queue, --max-queue-wait-ms)', () => {
  it('is 0 while there is room, whatever was observed', () => {
    const { gate, pushback } = setup();
    Object.assign(gate, { inEngine: 3, limit: 8, awaitingFirstToken: 1, firstTokenLimit: 4 });
    expect(pushback.expectedWaitMs()).toBe(0);
  });

  it('is unknown while a binding limit has no observed time yet', () => {
    const { gate, pushback } = setup();
    expect(pushback.expectedWaitMs()).toBeUndefined();
    pushback.slotHeld(1000);
    Object.assign(gate, { inEngine: 4, limit: 8, awaitingFirstToken: 2, firstTokenLimit: 2 });
    expect(pushback.expectedWaitMs(), 'F binds, no first token seen').toBeUndefined();
  });

  it.each([
    // N binds: (busy - N + queued + 1) x D / busy
    { gate: { inEngine: 8, limit: 8, queued: 0, awaitingFirstToken: 0, firstTokenLimit: Infinity }, slotMs: 1000, firstMs: 100, want: 125 },
    { gate: { inEngine: 8, limit: 8, queued: 7, awaitingFirstToken: 0, firstTokenLimit: Infinity }, slotMs: 1000, firstMs: 100, want: 1000 },
    { gate: { inEngine: 8, limit: 4, queued: 3, awaitingFirstToken: 0, firstTokenLimit: Infinity }, slotMs: 1000, firstMs: 100, want: 1000 },
    // F binds: (awaiting - F + queued + 1) x T / awaiting
    { gate: { inEngine: 3, limit: 8, queued: 1, awaitingFirstToken: 2, firstTokenLimit: 2 }, slotMs: 1000, firstMs: 100, want: 100 },
    // both bind: the longer wait
    { gate: { inEngine: 8, limit: 8, queued: 3, awaitingFirstToken: 2, firstTokenLimit: 2 }, slotMs: 1000, firstMs: 100, want: 500 },
    { gate: { inEngine: 8, limit: 8, queued: 3, awaitingFirstToken: 2, firstTokenLimit: 2 }, slotMs: 100, firstMs: 1000, want: 2000 },
  ])('$gate with D = $slotMs ms, T = $firstMs ms: $want ms', ({ gate: view, slotMs, firstMs, want }) => {
    const { gate, pushback } = setup();
    pushback.slotHeld(slotMs);
    pushback.firstTokenAfter(firstMs);
    Object.assign(gate, view);
    expect(pushback.meanFirstTokenMs).toBe(firstMs);
    expect(pushback.expectedWaitMs()).toBeCloseTo(want, 9);
  });
});

describe('RetryPushback.expectedWaitMs as if the free slots were taken (admit_now)', () => {
  it('counts a call queued behind the calls sent before it: the engine full at N', () => {
    const { gate, pushback } = setup();
    pushback.slotHeld(1000);
    Object.assign(gate, { inEngine: 3, limit: 8, queued: 0 });
    expect(pushback.expectedWaitMs(0)).toBe(0);
    // (8 - 8 + queued + 1) x 1000 / 8
    expect(pushback.expectedWaitMs(0, true)).toBeCloseTo(125, 9);
    expect(pushback.expectedWaitMs(3, true)).toBeCloseTo(500, 9);
    Object.assign(gate, { inEngine: 10, limit: 8, queued: 0 });
    expect(pushback.expectedWaitMs(0, true)).toBe(pushback.expectedWaitMs(0));
  });
});

describe('RetryPushback.predictedTtftMs (the load events predicted_ttft_ms)', () => {
  it('is unknown until a first token has been seen, even with room', () => {
    const { gate, pushback } = setup();
    Object.assign(gate, { inEngine: 1, limit: 8 });
    expect(pushback.predictedTtftMs()).toBeUndefined();
    pushback.firstTokenAfter(40);
    expect(pushback.predictedTtftMs()).toBe(40);
  });

  it('with room: the mean time from slot to first token; when full: the expected wait added to it', () => {
    const { gate, pushback } = setup();
    pushback.slotHeld(1000);
    pushback.firstTokenAfter(100);
    Object.assign(gate, { inEngine: 3, limit: 8, queued: 0 });
    expect(pushback.predictedTtftMs()).toBe(100);
    Object.assign(gate, { inEngine: 8, limit: 8, queued: 7 });
    expect(pushback.predictedTtftMs()).toBeCloseTo(1000 + 100, 9);
  });

  it('is unknown while the binding limit has no observed time, as the expected wait is', () => {
    const { gate, pushback } = setup();
    pushback.firstTokenAfter(100);
    Object.assign(gate, { inEngine: 8, limit: 8, queued: 0 });
    expect(pushback.predictedTtftMs()).toBeUndefined();
  });
});
