/**
 * One log line when the sidecar starts rejecting and one when the burst is over (with the
 * count), instead of a line per rejected call, which at 10k rejections/s would drown the logs.
 */
import type { Logger } from '../../platform/log.js';

export class RejectionLog {
  /** Rejections since start. */
  total = 0;
  private count = 0;
  private startedAt = 0;
  private lastAt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly state: () => Record<string, unknown>,
    /** A burst ends after this long without a rejection. */
    private readonly quietMs = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  rejected(): void {
    this.total++;
    this.lastAt = this.now();
    if (this.count++ === 0) {
      this.startedAt = this.lastAt;
      this.logger.warn('rejecting calls: worker at capacity', this.state());
      this.arm(this.quietMs);
    }
  }

  private arm(delay: number): void {
    this.timer = setTimeout(() => this.check(), delay);
    this.timer.unref();
  }

  private check(): void {
    const quietFor = this.now() - this.lastAt;
    if (quietFor < this.quietMs) return this.arm(this.quietMs - quietFor);
    this.logger.info('rejection burst over', { rejected: this.count, duration_ms: this.lastAt - this.startedAt, ...this.state() });
    this.count = 0;
    this.timer = undefined;
  }

  close(): void {
    clearTimeout(this.timer);
  }
}
