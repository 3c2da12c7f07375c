/** Manual clock for the scheduler: timers fire only when a test calls advance(). */
import type { Timers } from '../../src/tools/engine/scheduler.js';

interface Pending {
  at: number;
  callback: () => void;
  id: number;
}

export class FakeTimers implements Timers {
  now = 0;
  private pending: Pending[] = [];
  private nextId = 1;

  set(callback: () => void, ms: number): unknown {
    const timer = { at: this.now + ms, callback, id: this.nextId++ };
    this.pending.push(timer);
    return timer.id;
  }

  clear(handle: unknown): void {
    this.pending = this.pending.filter((t) => t.id !== handle);
  }

  get active(): number {
    return this.pending.length;
  }

  /** Time of the next timer, or undefined when none is pending. */
  get nextAt(): number | undefined {
    return this.pending.length === 0 ? undefined : Math.min(...this.pending.map((t) => t.at));
  }

  /** Fires, in time order, every timer due within `ms`, including ones set while advancing. */
  advance(ms: number): void {
    const end = this.now + ms;
    for (let guard = 0; guard < 1_000_000; guard++) {
      const next = this.nextAt;
      if (next === undefined || next > end) break;
      const timer = this.pending.find((t) => t.at === next)!;
      this.pending = this.pending.filter((t) => t !== timer);
      this.now = timer.at;
      timer.callback();
    }
    this.now = end;
  }
}
