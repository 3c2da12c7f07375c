/**
 * The frontend's live rates for its status page, sampled once a tick from its own registry (the
 * series of frontend-metrics.ts, so the page and /metrics cannot disagree): requests/s by final
 * status, overload answers (529s)/s, worker-side refusals/s by reason, retries/s, and TTFT p50
 * and p99 over the last `ttftWindowTicks` ticks. The last `historyTicks` samples are kept for the
 * sparklines.
 */
import type { Registry } from 'prom-client';
import { bucketDelta, bucketQuantile, histogramBuckets, sumByLabel } from '../../platform/status/metric-reader.js';
import { ratePerSecond, SeriesHistory } from '../../platform/status/series-history.js';

export const RATE_SERIES = ['requests', 'overload', 'refusals', 'retries', 'ttft_p50_ms', 'ttft_p99_ms'] as const;

export interface FrontendRatesOptions {
  readonly historyTicks: number;
  readonly ttftWindowTicks: number;
}

export interface RatesNow {
  /** Requests/s by final HTTP status, as strings ("200", "529", "499"). */
  readonly byStatus: Readonly<Record<string, number>>;
  readonly overload: number;
  readonly refusals: Readonly<Record<string, number>>;
  readonly retries: number;
  readonly ttftP50Ms: number | null;
  readonly ttftP99Ms: number | null;
}

interface Reading {
  readonly at: number;
  readonly byStatus: Map<string, number>;
  readonly overload: number;
  readonly refusals: Map<string, number>;
  readonly retries: number;
}

export class FrontendRates {
  private previous: Reading | undefined;
  private readonly ttftReadings: [number, number][][] = [];
  private current: RatesNow = { byStatus: {}, overload: 0, refusals: {}, retries: 0, ttftP50Ms: null, ttftP99Ms: null };
  readonly history: SeriesHistory;

  constructor(
    private readonly registry: Registry,
    private readonly options: FrontendRatesOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.history = new SeriesHistory(options.historyTicks, RATE_SERIES);
  }

  get latest(): RatesNow {
    return this.current;
  }

  /** Reads the counters once and turns the change since the last sample into rates. */
  async sample(): Promise<void> {
    const { registry } = this;
    const reading: Reading = {
      at: this.now(),
      byStatus: await sumByLabel(registry, 'dynamo_frontend_requests_total', 'status'),
      overload: total(await sumByLabel(registry, 'dynamo_frontend_model_rejection_total')),
      refusals: await sumByLabel(registry, 'dynamo_frontend_worker_rejections_total', 'reason'),
      retries: total(await sumByLabel(registry, 'dynamo_frontend_retries_total')),
    };
    const buckets = await histogramBuckets(registry, 'dynamo_frontend_time_to_first_token_seconds');
    this.ttftReadings.push(buckets);
    if (this.ttftReadings.length > this.options.ttftWindowTicks + 1) this.ttftReadings.shift();
    const window = bucketDelta(buckets, this.ttftReadings.length > 1 ? this.ttftReadings[0] : undefined);
    const ms = (q: number): number | null => {
      const seconds = bucketQuantile(q, window);
      return seconds === null ? null : Math.round(seconds * 10_000) / 10;
    };
    const before = this.previous;
    this.previous = reading;
    if (!before) return;
    const elapsed = reading.at - before.at;
    const rates = (now: Map<string, number>, then: Map<string, number>): Record<string, number> =>
      Object.fromEntries([...now].map(([key, value]) => [key, round(ratePerSecond(then.get(key) ?? 0, value, elapsed))]));
    this.current = {
      byStatus: rates(reading.byStatus, before.byStatus),
      overload: round(ratePerSecond(before.overload, reading.overload, elapsed)),
      refusals: rates(reading.refusals, before.refusals),
      retries: round(ratePerSecond(before.retries, reading.retries, elapsed)),
      ttftP50Ms: ms(0.5),
      ttftP99Ms: ms(0.99),
    };
    this.history.push(reading.at, {
      requests: round(Object.values(this.current.byStatus).reduce((a, b) => a + b, 0)),
      overload: this.current.overload,
      refusals: round(Object.values(this.current.refusals).reduce((a, b) => a + b, 0)),
      retries: this.current.retries,
      ttft_p50_ms: this.current.ttftP50Ms,
      ttft_p99_ms: this.current.ttftP99Ms,
    });
  }
}

function total(sums: Map<string, number>): number {
  let sum = 0;
  for (const value of sums.values()) sum += value;
  return sum;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
