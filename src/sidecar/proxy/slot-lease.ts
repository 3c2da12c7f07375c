/**
 * An engine slot held by one call, from admission to its release. Given back exactly once,
 * whatever ends the call; the traffic tap that watches the call's bytes lives as long as it.
 */
import type { Permit } from '../admission/gate.js';
import type { CallObserver, TrafficTap } from './call-context.js';

export class SlotLease {
  /** Set on dispatch when the observer wants the call's bytes; ended with the lease. */
  tap: TrafficTap | undefined;
  private permit: Permit | undefined;
  private firstTokenSeen = false;

  constructor(
    permit: Permit,
    /** When the slot was taken (the call's clock): the queue wait is not holding time. */
    private readonly since: number,
  ) {
    this.permit = permit;
  }

  /** The engine's first message for the call passed: frees its place under the first-token limit and reports how long it took (the expected-wait estimate's input). Once; nothing after release. */
  firstToken(now: number, observer: CallObserver | undefined): void {
    const permit = this.permit;
    if (!permit || this.firstTokenSeen) return;
    this.firstTokenSeen = true;
    permit.firstToken();
    observer?.firstToken?.(now - this.since);
  }

  /** Gives the slot back and reports how long it was held (the adaptive pushback's input); later calls do nothing. */
  release(now: number, observer: CallObserver | undefined): void {
    const permit = this.permit;
    if (!permit) return;
    this.permit = undefined;
    permit.release();
    const tap = this.tap;
    this.tap = undefined;
    tap?.end();
    observer?.slotReleased?.(now - this.since);
  }
}
