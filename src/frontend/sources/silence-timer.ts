/**
 * The push source's "no update for 3 heartbeats" timer, made to measure the stream's silence
 * rather than the frontend's own stall. When the event loop is blocked past the moment the
 * window ends (a long synchronous task: tokenizing a huge prompt took seconds), Node runs due
 * timers before it reads the sockets, so updates that arrived during the stall are still unread
 * when a plain timer fires, and a live worker would be declared silent and made unroutable
 * (issue 20: both workers at once). So the timer compares when it fired with when it was due:
 * late by more than a small tolerance means the loop was busy when the window ended, and the
 * verdict waits one more grace period (a heartbeat), in which pending input is read and re-arms
 * the window. On time means the loop was free to read and nothing came: silence.
 */

export interface SilenceTimerDeps {
  readonly setTimer: (callback: () => void, ms: number) => unknown;
  readonly clearTimer: (handle: unknown) => void;
  /** Monotonic ms. */
  readonly now: () => number;
}

/** The most lateness taken for timer jitter (GC pauses, a busy but turning loop) rather than a stall. */
export const LATE_TOLERANCE_MS = 20;

const SYSTEM: SilenceTimerDeps = {
  setTimer: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    // A silence timer alone must not keep the process alive.
    timer.unref();
    return timer;
  },
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
};

export class SilenceTimer {
  private handle: unknown;
  private armed = false;

  constructor(
    private readonly onSilence: () => void,
    private readonly deps: SilenceTimerDeps = SYSTEM,
  ) {}

  /** (Re)starts the window: silence is declared `windowMs` from now unless arm() or disarm() comes first; `graceMs` is the extra wait after a late firing. */
  arm(windowMs: number, graceMs: number): void {
    this.disarm();
    this.armed = true;
    this.schedule(windowMs, graceMs);
  }

  disarm(): void {
    if (!this.armed) return;
    this.armed = false;
    this.deps.clearTimer(this.handle);
  }

  private schedule(ms: number, graceMs: number): void {
    const due = this.deps.now() + ms;
    this.handle = this.deps.setTimer(() => {
      if (!this.armed) return;
      const late = this.deps.now() - due;
      // A fraction of the grace for short heartbeats, so that a 10 ms heartbeat's jitter is not a stall.
      if (late > Math.min(LATE_TOLERANCE_MS, graceMs / 2)) {
        this.schedule(graceMs, graceMs);
        return;
      }
      this.armed = false;
      this.onSilence();
    }, ms);
  }
}
