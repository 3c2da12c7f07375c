/**
 * The adaptive engine request limit (--admission-mode adaptive): Netflix's gradient2 controller
 * (concurrency-limits, Gradient2Limit), fed with the time from a call's slot to its first token
 * (the engine's queueing plus its prefill, what admitting more calls makes worse).
 *
 * For each window of samples, with `short` the window's mean and `long` a slow exponential mean
 * of the windows (the engine's unloaded time, as it was lately):
 *
 *     gradient = max(0.5, min(1, tolerance x long / short))
 *     limit'   = limit x gradient + queueSize                (room to probe upwards)
 *     limit    = limit x (1 - smoothing) + limit' x smoothing, within [floor, ceiling]
 *
 * so the limit shrinks while the first token comes later than `tolerance` times its usual time,
 * and grows by about `queueSize x smoothing` a window while it does not. When short stays under
 * half of long (the engine got faster, or long was learnt under load), long decays towards it,
 * as gradient2 does, so the limit does not stay pinned low. The ceiling is the configured
 * --engine-request-limit: adaptive mode only ever admits less than the operator allowed.
 */

export interface GradientLimitOptions {
  /** The least the limit goes down to. */
  readonly floor: number;
  /** The most: the configured engine request limit. */
  readonly ceiling: number;
  /** Samples per window (default 10). */
  readonly windowSamples?: number;
  /** How much slower than usual the first token may come before the limit shrinks (gradient2: 1.5). */
  readonly tolerance?: number;
  /** Weight of a new window in the limit (gradient2: 0.2). */
  readonly smoothing?: number;
  /** Windows the long mean spans (gradient2: 600 samples; here windows of `windowSamples`). */
  readonly longWindows?: number;
}

export class GradientLimit {
  private estimate: number;
  private long: number | undefined;
  private windowSum = 0;
  private windowCount = 0;
  private readonly windowSamples: number;
  private readonly tolerance: number;
  private readonly smoothing: number;
  private readonly longWeight: number;
  private floor: number;
  private ceiling: number;

  constructor(options: GradientLimitOptions) {
    checkBounds(options.floor, options.ceiling);
    this.floor = options.floor;
    this.ceiling = options.ceiling;
    this.estimate = options.ceiling;
    this.windowSamples = options.windowSamples ?? 10;
    this.tolerance = options.tolerance ?? 1.5;
    this.smoothing = options.smoothing ?? 0.2;
    this.longWeight = 2 / ((options.longWindows ?? 60) + 1);
  }

  /** The limit in force: a whole number within [floor, ceiling]. */
  get limit(): number {
    return Math.max(this.floor, Math.min(this.ceiling, Math.floor(this.estimate)));
  }

  /** New bounds (a live change of the configured limit); the estimate is kept within them. */
  setBounds(floor: number, ceiling: number): void {
    checkBounds(floor, ceiling);
    this.floor = floor;
    this.ceiling = ceiling;
    this.estimate = Math.max(floor, Math.min(ceiling, this.estimate));
  }

  /** One call's time from slot to first token; returns true when the limit changed. */
  sample(ms: number): boolean {
    if (!(ms >= 0) || !Number.isFinite(ms)) return false;
    this.windowSum += ms;
    if (++this.windowCount < this.windowSamples) return false;
    const short = Math.max(this.windowSum / this.windowCount, 1e-3);
    this.windowSum = 0;
    this.windowCount = 0;
    const before = this.limit;
    this.long = this.long === undefined ? short : this.long + this.longWeight * (short - this.long);
    if (this.long / short > 2) this.long *= 0.95; // gradient2's drift correction
    const gradient = Math.max(0.5, Math.min(1, (this.tolerance * this.long) / short));
    const queueSize = Math.sqrt(this.estimate);
    const next = this.estimate * gradient + queueSize;
    this.estimate = Math.max(this.floor, Math.min(this.ceiling, this.estimate * (1 - this.smoothing) + next * this.smoothing));
    return this.limit !== before;
  }
}

function checkBounds(floor: number, ceiling: number): void {
  if (!(Number.isInteger(floor) && floor >= 1)) throw new RangeError(`GradientLimit floor must be an integer >= 1, got ${floor}`);
  if (!(Number.isInteger(ceiling) && ceiling >= floor))
    throw new RangeError(`GradientLimit ceiling must be an integer >= the floor (${floor}), got ${ceiling}`);
}
