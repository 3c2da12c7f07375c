// The push source's silence timer on a fake clock: silence when it fires on time, another look when the loop was stalled past its due time.
import { describe, expect, it } from 'vitest';
import { LATE_TOLERANCE_MS, SilenceTimer } from '../../../../src/frontend/sources/silence-timer.js';

/** One pending timer at a time, fired by the test at a clock value it chooses (a stall is a clock jump before firing). */
class FakeLoop {
  now = 0;
  pending: { callback: () => void; at: number; id: number } | undefined;
  private nextId = 1;
  readonly deps = {
    setTimer: (callback: () => void, ms: number) => {
      this.pending = { callback, at: this.now + ms, id: this.nextId++ };
      return this.pending.id;
    },
    clearTimer: (handle: unknown) => {
      if (this.pending?.id === handle) this.pending = undefined;
    },
    now: () => this.now,
  };

  /** Fires the pending timer `lateBy` ms after it was due (the loop was blocked that long past it). */
  fire(lateBy = 0): void {
    const timer = this.pending!;
    this.pending = undefined;
    this.now = timer.at + lateBy;
    timer.callback();
  }
}

function armed(loop: FakeLoop): { timer: SilenceTimer; silences: () => number } {
  let count = 0;
  const timer = new SilenceTimer(() => count++, loop.deps);
  timer.arm(3000, 1000);
  return { timer, silences: () => count };
}

describe('SilenceTimer', () => {
  it('declares silence when the window ends on time with nothing received', () => {
    const loop = new FakeLoop();
    const { silences } = armed(loop);
    expect(loop.pending?.at).toBe(3000);
    loop.fire(LATE_TOLERANCE_MS);
    expect(silences()).toBe(1);
    expect(loop.pending).toBeUndefined();
  });

  it('does not declare silence when it fires late because the loop was blocked, and looks again one grace period later', () => {
    const loop = new FakeLoop();
    const { silences } = armed(loop);
    // A 5 s stall covering the end of the window: the updates sent meanwhile are unread, not missing.
    loop.fire(2000);
    expect(silences()).toBe(0);
    expect(loop.pending?.at).toBe(5000 + 1000);
    // The second look is on time and nothing came: now it is silence.
    loop.fire();
    expect(silences()).toBe(1);
  });

  it('is re-armed by an update read after the stall, and never fires for the old window', () => {
    const loop = new FakeLoop();
    const { timer, silences } = armed(loop);
    loop.fire(2000);
    // The pending update is read: the stream re-arms a fresh window.
    timer.arm(3000, 1000);
    expect(loop.pending?.at).toBe(5000 + 3000);
    timer.disarm();
    expect(loop.pending).toBeUndefined();
    expect(silences()).toBe(0);
  });

  it('keeps looking while every firing is late (the loop stalls again and again)', () => {
    const loop = new FakeLoop();
    const { silences } = armed(loop);
    for (let i = 0; i < 5; i++) loop.fire(1500);
    expect(silences()).toBe(0);
    loop.fire(0);
    expect(silences()).toBe(1);
  });

  it('takes lateness over half the grace as a stall for short heartbeats (10 ms: 5 ms)', () => {
    const loop = new FakeLoop();
    let count = 0;
    new SilenceTimer(() => count++, loop.deps).arm(30, 10);
    loop.fire(6);
    expect(count).toBe(0);
    loop.fire(5);
    expect(count).toBe(1);
  });
});
