/**
 * A worker's credit: how many more calls this frontend may send it before it hears from it
 * again, from the worker's own word (its load event's admit_now) and the calls sent since. It is
 * also where the calls (and prompt tokens) sent since the worker's latest report are counted.
 *
 *   remaining = admit_now - sent since the report - our calls the report cannot have counted
 *
 * The last term is the race between a report and the calls in transit: a call sent just before
 * a report was taken reaches the sidecar after it, so that report's admit_now still counts its
 * place as free. Our calls sent before the report and still open are at most the worker's
 * occupancy (engine_request + request_queue) if the report saw them all; what they exceed it by
 * went unseen. With one frontend this is exact (every call the worker holds is ours), and errs
 * only toward fewer credits (a call whose answer is still on its way back counts as unseen).
 * With several frontends the others' calls hide some of ours: the estimate can run over, the
 * worker refuses the extra call, and the refusal is handled as without credits (router.ts).
 *
 * A report older than the one applied (a lower sequence with no newer timestamp: NATS redelivery
 * or a push stream's stale update) is ignored. A newer timestamp with a lower sequence is a
 * restarted sidecar and counts. No admit_now (Dynamo's workers, older sidecars, admission off):
 * no credit state, remaining is undefined, and routing is as it was.
 */
export interface CreditReport {
  /** admit_now, already clamped to the worker's own N + Q (load-report.ts); undefined: not said. */
  readonly admitNow: number | undefined;
  /** engine_request + request_queue when the report was taken. */
  readonly occupancy: number;
  readonly sequence: number | undefined;
  readonly timestampMs: number | undefined;
}

export class WorkerCredit {
  private admitNow: number | undefined;
  private occupancy = 0;
  private sequence = -1;
  private timestampMs = -1;
  /** Bumped by each report applied: a call knows whether it was sent before the latest one. */
  private epoch = 0;
  /** Calls sent since the latest report, open or ended (the report counted none of them), and their prompt tokens. */
  private sent = 0;
  private sentTokens = 0;
  /** Of ours still open: sent since the latest report, and sent before it. */
  private openSinceReport = 0;
  private openBeforeReport = 0;

  /** Applies a report; false when it was older than the one applied (ignored). */
  report(report: CreditReport): boolean {
    const { sequence, timestampMs } = report;
    const newerClock = timestampMs !== undefined && timestampMs > this.timestampMs;
    if (sequence !== undefined && sequence < this.sequence && !newerClock) return false;
    if (sequence !== undefined) this.sequence = sequence;
    if (timestampMs !== undefined) this.timestampMs = Math.max(this.timestampMs, timestampMs);
    this.epoch++;
    this.openBeforeReport += this.openSinceReport;
    this.openSinceReport = 0;
    this.sent = 0;
    this.sentTokens = 0;
    this.admitNow = report.admitNow;
    this.occupancy = report.occupancy;
    return true;
  }

  /** One call of `promptTokens` sent to the worker; the function returned ends it (idempotent). */
  send(promptTokens = 0): () => void {
    const epoch = this.epoch;
    this.sent++;
    this.sentTokens += promptTokens;
    this.openSinceReport++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (epoch === this.epoch) this.openSinceReport--;
      else this.openBeforeReport--;
    };
  }

  /** Calls the worker still admits from this frontend; undefined: it does not say. */
  get remaining(): number | undefined {
    if (this.admitNow === undefined) return undefined;
    const unseen = Math.max(0, this.openBeforeReport - this.occupancy);
    return Math.max(0, this.admitNow - this.sent - unseen);
  }

  /**
   * Attempts sent since the latest report (any rank), and their prompt tokens: what that report's
   * predicted_ttft_ms and prefill_tokens_ahead cannot include (predicted-ttft routing, router.ts).
   * Counted for every worker, whether it gives credits or not.
   */
  get sentSinceReport(): number {
    return this.sent;
  }

  get sentTokensSinceReport(): number {
    return this.sentTokens;
  }

  /** Whether the worker reports credits at all (the lease after a refusal depends on it). */
  get reported(): boolean {
    return this.admitNow !== undefined;
  }
}
