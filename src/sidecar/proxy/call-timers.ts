/**
 * The two timers of a proxied call: its deadline, and the queue timeout while it waits for a
 * slot. Both are one-shot timers on the call's clock (a fake one in unit tests); the call clears
 * both when it ends, and the queue timeout when it leaves the queue.
 */
import { MAX_TIMER_MS } from '../../protocol/grpc/deadline.js';
import type { CallClock } from './call-context.js';
import type { CallEvents } from './call-listeners.js';

export class CallTimers {
  private deadline: unknown;
  private queue: unknown;

  constructor(
    private readonly clock: CallClock,
    private readonly call: Pick<CallEvents, 'onDeadline' | 'onQueueTimeout'>,
  ) {}

  /**
   * Tells the call at `deadlineAt`. Node's timers overflow past 2^31-1 ms (about 24.8 days) and
   * would fire at once, so a longer deadline fires early, in steps of the maximum: the call finds
   * its deadline still ahead and arms it again.
   */
  armDeadline(deadlineAt: number): void {
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, deadlineAt - this.clock.now()));
    this.deadline = this.clock.setTimer(() => {
      this.deadline = undefined;
      this.call.onDeadline();
    }, delay);
  }

  /**
   * Tells the call when it has been queued `ms` (0 or unset: never), unless its own deadline
   * comes first: then DEADLINE_EXCEEDED is the answer, not a refusal.
   */
  armQueueTimeout(ms: number | undefined, queuedAt: number, deadlineAt: number | undefined): void {
    if (!ms || (deadlineAt !== undefined && deadlineAt <= queuedAt + ms)) return;
    this.queue = this.clock.setTimer(() => {
      this.queue = undefined;
      this.call.onQueueTimeout();
    }, ms);
  }

  clearQueueTimeout(): void {
    if (this.queue !== undefined) this.clock.clearTimer(this.queue);
    this.queue = undefined;
  }

  clearAll(): void {
    if (this.deadline !== undefined) this.clock.clearTimer(this.deadline);
    this.deadline = undefined;
    this.clearQueueTimeout();
  }
}
