/**
 * Polls the engine's KV load and keeps the latest per dp rank: its /metrics by default, or any
 * other reader of the same shape (`read`; the GetLoads RPC, engine-get-loads.ts).
 *
 *   const s = new EngineScraper({ url, intervalMs: config.scrapeIntervalMs, format: 'auto', logger, onUpdate });
 *   const g = new EngineScraper({ url: getLoadsPath, read: getLoadsReader(...), intervalMs, logger, onUpdate });
 *   s.start();  ...  s.ranks / s.stale / s.errors / s.unsupported  ...  s.stop();
 *
 * Behaviour:
 * - One scrape at a time: the next one is scheduled only after the previous settled, at
 *   `intervalMs` from its start (or at once if it ran long). Timers are unref()ed.
 * - Each scrape has a deadline `timeoutMs` (default 80% of the interval, within 1-5 s, so that a
 *   short interval does not turn a busy engine's slow answer into "stale").
 * - A scrape is good when the body parses to at least one rank with a KV number (used blocks
 *   or usage ratio). Anything else (refused, timeout, non-2xx, HTML, only request gauges)
 *   counts as an error and makes the source stale; the last good values are kept for
 *   inspection, but `stale` tells consumers not to trust them.
 * - Logs and onUpdate: one log per state change (fresh -> stale, stale -> fresh), never per
 *   failure. onUpdate is called on a state change and whenever a good scrape changes the values.
 * - A reader that throws {@link LoadSourceUnsupportedError} (the engine answered that it has no
 *   such source, e.g. UNIMPLEMENTED) stops the polling for good: `unsupported` and `stale` are
 *   true, one warning is logged, onUpdate runs once.
 * - A capacity the engine reports out of its flag's range (kv_total_blocks, block size) is left
 *   out of the rank's load, so the flag or the engine's word at discovery stands; each such field
 *   is warned about once for the scraper's lifetime, not every poll (learned-bounds.ts).
 */
import type { Logger } from '../../platform/log.js';
import { DEFAULT_ENGINE_METRICS_FORMAT } from '../config/sidecar-config.js';
import type { EngineMetricsFormatOption } from '../../protocol/engine/metrics-formats.js';
import type { AcceptFact } from '../../protocol/engine/engine-facts.js';
import { parseEngineMetrics, type EngineMetricsResult, type ScrapedLoad } from './engine-metrics-reader.js';
import { LearnedValueCheck } from './learned-bounds.js';

export type FetchText = (url: string, signal: AbortSignal) => Promise<string>;

/** One read of the engine's load, its capacity figures judged by `accept`; throws ScrapeError (or anything) for a failed read. */
export type LoadRead = (signal: AbortSignal, accept?: AcceptFact) => Promise<Pick<EngineMetricsResult, 'ranks' | 'problems'>>;

export interface EngineScraperOptions {
  /** The metrics URL; with `read`, only a name for logs. */
  url: string;
  /** Replaces the scrape of `url`; `format` and `fetchText` are then unused. */
  read?: LoadRead;
  /** What `read` reads, for metrics; default 'scrape'. */
  source?: 'scrape' | 'getloads';
  /** --scrape-interval-ms. */
  intervalMs: number;
  timeoutMs?: number;
  /** Default DEFAULT_ENGINE_METRICS_FORMAT (auto). */
  format?: EngineMetricsFormatOption;
  logger: Logger;
  onUpdate?: () => void;
  /** Replaceable for tests; default uses global fetch. */
  fetchText?: FetchText;
  now?: () => number;
}

/** A scrape that produced no usable KV numbers; `message` is what gets logged. */
export class ScrapeError extends Error {
  override readonly name = 'ScrapeError';
}

/** The engine has no such load source (it answered UNIMPLEMENTED): polling stops. */
export class LoadSourceUnsupportedError extends Error {
  override readonly name = 'LoadSourceUnsupportedError';
}

const MAX_BODY_BYTES = 16 * 1024 * 1024;

export const defaultFetchText: FetchText = async (url, signal) => {
  const res = await fetch(url, { signal, headers: { accept: 'text/plain; version=0.0.4' } });
  if (!res.ok) {
    await res.body?.cancel();
    throw new ScrapeError(`HTTP ${res.status} from ${url}`);
  }
  const length = Number(res.headers.get('content-length') ?? 0);
  if (length > MAX_BODY_BYTES) {
    await res.body?.cancel();
    throw new ScrapeError(`metrics body of ${length} bytes exceeds ${MAX_BODY_BYTES}`);
  }
  return res.text();
};

/**
 * A read's deadline when none is given: 80% of the interval, within 1-5 s, so that a short
 * interval does not turn a busy engine's slow answer into "stale".
 */
export function defaultReadTimeoutMs(intervalMs: number): number {
  return Math.min(5000, Math.max(1000, Math.floor(intervalMs * 0.8)));
}

export class EngineScraper {
  readonly url: string;
  readonly source: 'scrape' | 'getloads';
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  private readonly read: LoadRead;
  private readonly logger: Logger;
  private readonly onUpdate: () => void;
  private readonly now: () => number;
  private readonly bounds: LearnedValueCheck;

  private state: 'unknown' | 'fresh' | 'stale' | 'unsupported' = 'unknown';
  private latest: ReadonlyMap<number, ScrapedLoad> = new Map();
  private latestKey = '';
  private timer: NodeJS.Timeout | undefined;
  private inFlight: AbortController | undefined;
  private running = false;
  private errorCount = 0;
  /** Problems reported by the last parse (bounded); for /load diagnostics, not for logging per scrape. */
  lastProblems: readonly string[] = [];
  lastError: string | undefined;
  lastSuccessMs: number | undefined;

  constructor(options: EngineScraperOptions) {
    this.url = options.url;
    this.source = options.source ?? 'scrape';
    this.intervalMs = options.intervalMs;
    this.timeoutMs = options.timeoutMs ?? defaultReadTimeoutMs(this.intervalMs);
    const format = options.format ?? DEFAULT_ENGINE_METRICS_FORMAT;
    const fetchText = options.fetchText ?? defaultFetchText;
    this.read = options.read ?? (async (signal, accept) => parseEngineMetrics(await fetchText(this.url, signal), format, accept));
    this.logger = options.logger;
    this.bounds = new LearnedValueCheck(options.logger);
    this.onUpdate = options.onUpdate ?? (() => {});
    this.now = options.now ?? Date.now;
  }

  /** The engine said it has no such source; nothing more is asked. */
  get unsupported(): boolean {
    return this.state === 'unsupported';
  }

  /** True until the first good scrape and after any failed one. */
  get stale(): boolean {
    return this.state !== 'fresh';
  }

  get errors(): number {
    return this.errorCount;
  }

  /** Latest good values per dp rank (kept while stale; check {@link stale}). */
  get ranks(): ReadonlyMap<number, ScrapedLoad> {
    return this.latest;
  }

  start(): void {
    if (this.running || this.state === 'unsupported') return;
    this.running = true;
    this.schedule(0);
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.inFlight?.abort();
  }

  /** One scrape now; resolves after state and callbacks are updated. Never rejects. */
  async scrapeOnce(): Promise<void> {
    const controller = new AbortController();
    this.inFlight = controller;
    const signal = AbortSignal.any([controller.signal, AbortSignal.timeout(this.timeoutMs)]);
    try {
      const result = await this.read(signal, (fact, field, value) => this.bounds.accept(fact, field, value));
      this.lastProblems = result.problems;
      const usable = [...result.ranks.values()].some((r) => r.kvUsedBlocks !== undefined || r.kvUsagePerc !== undefined);
      if (!usable) throw new ScrapeError(result.problems[result.problems.length - 1] ?? 'no KV-cache numbers in the metrics');
      this.succeeded(result.ranks);
    } catch (err) {
      if (controller.signal.aborted) return; // stopped: neither an error nor a state change
      if (err instanceof LoadSourceUnsupportedError) return this.unsupportedSource(err.message);
      this.failed(signal.aborted ? `timed out after ${this.timeoutMs} ms` : describe(err));
    } finally {
      if (this.inFlight === controller) this.inFlight = undefined;
    }
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      const started = this.now();
      void this.scrapeOnce().then(() => {
        if (this.running) this.schedule(Math.max(0, this.intervalMs - (this.now() - started)));
      });
    }, delayMs);
    this.timer.unref();
  }

  private succeeded(ranks: ReadonlyMap<number, ScrapedLoad>): void {
    this.lastSuccessMs = this.now();
    this.lastError = undefined;
    const key = JSON.stringify([...ranks]);
    const changed = key !== this.latestKey;
    this.latest = ranks;
    this.latestKey = key;
    const wasFresh = this.state === 'fresh';
    this.state = 'fresh';
    if (!wasFresh) this.logger.info('engine metrics fresh', { url: this.url, ranks: ranks.size, problems: this.lastProblems.slice(0, 5) });
    if (changed || !wasFresh) this.onUpdate();
  }

  private unsupportedSource(reason: string): void {
    this.stop();
    this.state = 'unsupported';
    this.lastError = reason;
    this.logger.warn('engine load source unsupported; KV usage unknown (kv_used_blocks null)', { source: this.url, reason });
    this.onUpdate();
  }

  private failed(reason: string): void {
    this.errorCount++;
    this.lastError = reason;
    if (this.state === 'stale') return;
    this.state = 'stale';
    this.logger.warn('engine metrics stale', { url: this.url, reason });
    this.onUpdate();
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}
