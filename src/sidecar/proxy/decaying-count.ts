/**
 * A count that forgets: each event weighs e^(-age/τ), so the value reads as "events in about the
 * last τ" whatever came before. The Rapid Reset rule judges a connection by what it does now:
 * a young connection is not condemned by a burst it shares with no history, and an old one is
 * not excused by the calls it made an hour ago.
 */
export class DecayingCount {
  private value = 0;
  private at: number;

  /** `tauMs`: the time constant (after τ an event weighs 1/e); `now`: the clock in ms. */
  constructor(
    private readonly tauMs: number,
    now: number,
  ) {
    if (!(tauMs > 0)) throw new RangeError(`tauMs must be > 0, got ${tauMs}`);
    this.at = now;
  }

  add(now: number, weight = 1): void {
    this.decayTo(now);
    this.value += weight;
  }

  read(now: number): number {
    this.decayTo(now);
    return this.value;
  }

  private decayTo(now: number): void {
    // A clock that steps back (a fake, or a wall clock set back) decays nothing.
    if (now > this.at) this.value *= Math.exp(-(now - this.at) / this.tauMs);
    this.at = Math.max(this.at, now);
  }
}
