/**
 * Counts and latency samples of a load run, and the summary built from them. Every attempt
 * that was sent ends in exactly one of completed / rejected / errors, so
 * sent = completed + rejected + sum(errors) holds by construction (checked in tests).
 */
import { GrpcStatus, statusName } from '../../protocol/grpc/status.js';

export interface Percentiles {
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export interface LoadSummary {
  /** host:port (gRPC), or the endpoint URL (--openai). */
  target: string;
  /** --openai only: the model asked for and the API (chat or completions). */
  model?: string;
  api?: string;
  /** Attempts sent, retries included. */
  sent: number;
  completed: number;
  /** Attempts answered RESOURCE_EXHAUSTED, or an overload status or 429 (--openai), also those retried later. */
  rejected: number;
  /** --openai only: of `rejected`, those answered 429 (the tenant at its in-flight cap) rather than fleet-full. */
  tenant_capped?: number;
  /**
   * Other failures by gRPC status name; NO_COMPLETE for OK calls without a
   * result. --openai: HTTP_<status>, NETWORK_<code>, STREAM_BROKEN, CANCELLED, ...
   */
  errors: Record<string, number>;
  /** --openai only: responses by HTTP status (attempts that got no response are not in it). */
  statuses?: Record<string, number>;
  /** Attempts that were retries of a rejected attempt (already counted in sent). */
  retries: number;
  ttft_ms: Percentiles;
  itl_ms: Percentiles;
  /** Time from sending an attempt to its refusal (RESOURCE_EXHAUSTED or an overload status). */
  time_to_reject_ms: Percentiles;
  /** With an SLO (--slo-ttft-ms, --slo-itl-ms; null = unbounded): completed requests that met it. */
  slo?: { ttft_ms: number | null; itl_ms: number | null; good: number; goodput_per_s: number };
  output_tokens: number;
  tokens_per_s: number;
  requests_per_s: number;
  duration_s: number;
}

/** One completed attempt's token timing: what the SLO judges. */
export interface TokenTiming {
  readonly ttftMs: number;
  /** Mean gap between its tokens after the first; undefined with fewer than two. */
  readonly meanItlMs: number | undefined;
}

/** The latency a completed request must meet to count as goodput; undefined = unbounded. */
export interface LatencySlo {
  readonly ttftMs: number | undefined;
  readonly itlMs: number | undefined;
}

export type AttemptOutcome =
  | { readonly kind: 'completed'; readonly timing?: TokenTiming | undefined }
  | { readonly kind: 'failed'; readonly code: GrpcStatus }
  /** The call ended OK but without a `complete` message; `label` names why. */
  | { readonly kind: 'bad-response'; readonly label: 'NO_COMPLETE' }
  /** An HTTP overload status (529, or one given by --overload-status), or 429 (`tenantCapped`: the tenant is at its in-flight cap). */
  | { readonly kind: 'rejected'; readonly tenantCapped?: boolean }
  /** Any other HTTP failure; `label` is the errors key (HTTP_404, NETWORK_ECONNREFUSED, CANCELLED, ...). */
  | { readonly kind: 'error'; readonly label: string };

/** A request without a first token never meets an SLO; one token has no gap to judge. */
function meetsSlo(timing: TokenTiming | undefined, slo: LatencySlo): boolean {
  if (timing === undefined) return false;
  if (slo.ttftMs !== undefined && timing.ttftMs > slo.ttftMs) return false;
  return slo.itlMs === undefined || timing.meanItlMs === undefined || timing.meanItlMs <= slo.itlMs;
}

/** Whether the attempt was refused for overload: the one outcome that --retry retries. */
export function isRejection(outcome: AttemptOutcome): boolean {
  return outcome.kind === 'rejected' || (outcome.kind === 'failed' && outcome.code === GrpcStatus.RESOURCE_EXHAUSTED);
}

/** Nearest-rank percentile of an ascending array; null when empty. */
export function percentile(sorted: ArrayLike<number>, q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}

function percentiles(samples: number[]): Percentiles {
  const sorted = Float64Array.from(samples).sort();
  const round = (v: number | null): number | null => (v === null ? null : Math.round(v * 1000) / 1000);
  return { p50: round(percentile(sorted, 0.5)), p90: round(percentile(sorted, 0.9)), p99: round(percentile(sorted, 0.99)) };
}

export class LoadRecorder {
  sent = 0;
  completed = 0;
  rejected = 0;
  /** Of `rejected`, answers of 429 (--openai). */
  tenantCapped = 0;
  retries = 0;
  outputTokens = 0;
  inFlight = 0;
  private readonly errors = new Map<string, number>();
  /** HTTP statuses seen; undefined in gRPC mode, so its summary has no `statuses`. */
  private readonly statuses: Map<number, number> | undefined;
  private readonly ttft: number[] = [];
  private readonly itl: number[] = [];
  private readonly rejectMs: number[] = [];
  /** Completed requests within the SLO. */
  good = 0;
  private readonly slo: LatencySlo | undefined;

  constructor(options: { readonly httpStatuses?: boolean; readonly slo?: LatencySlo | undefined } = {}) {
    this.statuses = options.httpStatuses ? new Map() : undefined;
    this.slo = options.slo;
  }

  attemptStarted(isRetry: boolean): void {
    this.sent += 1;
    this.inFlight += 1;
    if (isRetry) this.retries += 1;
  }

  tokensReceived(count: number): void {
    this.outputTokens += count;
  }

  httpStatus(status: number): void {
    this.statuses?.set(status, (this.statuses.get(status) ?? 0) + 1);
  }

  ttftSample(ms: number): void {
    this.ttft.push(ms);
  }

  itlSample(ms: number): void {
    this.itl.push(ms);
  }

  /** `elapsedMs`: from sending the attempt to its end (the time to a refusal is kept). */
  attemptEnded(outcome: AttemptOutcome, elapsedMs?: number): void {
    this.inFlight -= 1;
    if (outcome.kind === 'completed') {
      this.completed += 1;
      if (this.slo && meetsSlo(outcome.timing, this.slo)) this.good += 1;
    } else if (isRejection(outcome)) {
      this.rejected += 1;
      if (outcome.kind === 'rejected' && outcome.tenantCapped === true) this.tenantCapped += 1;
      if (elapsedMs !== undefined) this.rejectMs.push(elapsedMs);
    } else if (outcome.kind !== 'rejected') {
      const label = outcome.kind === 'failed' ? statusName(outcome.code) : outcome.label;
      this.errors.set(label, (this.errors.get(label) ?? 0) + 1);
    }
  }

  get errorCount(): number {
    let total = 0;
    for (const n of this.errors.values()) total += n;
    return total;
  }

  summary(target: string, durationMs: number): LoadSummary {
    // Rates come from the duration as reported (whole ms), so the summary agrees with itself:
    // with a sub-millisecond remainder, requests / duration_s and requests_per_s could differ.
    const seconds = Math.round(Math.max(durationMs, 1)) / 1000;
    const rate = (n: number): number => Math.round((n / seconds) * 100) / 100;
    return {
      target,
      sent: this.sent,
      completed: this.completed,
      rejected: this.rejected,
      ...(this.statuses && { tenant_capped: this.tenantCapped }),
      errors: Object.fromEntries([...this.errors.entries()].sort(([a], [b]) => a.localeCompare(b))),
      ...(this.statuses && { statuses: Object.fromEntries([...this.statuses.entries()].sort(([a], [b]) => a - b).map(([k, n]) => [String(k), n])) }),
      retries: this.retries,
      ttft_ms: percentiles(this.ttft),
      itl_ms: percentiles(this.itl),
      time_to_reject_ms: percentiles(this.rejectMs),
      ...(this.slo && { slo: { ttft_ms: this.slo.ttftMs ?? null, itl_ms: this.slo.itlMs ?? null, good: this.good, goodput_per_s: rate(this.good) } }),
      output_tokens: this.outputTokens,
      tokens_per_s: rate(this.outputTokens),
      requests_per_s: rate(this.completed),
      duration_s: seconds,
    };
  }
}
