/**
 * Load reporting, composed from one LoadConfig: the tracker, its three sources (engine scrape,
 * Generate traffic accounting, static flags), the NATS publisher and their metrics. The proxy
 * sees only the small surface below; none of it ever waits on the network.
 */
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { AdmissionGate } from '../admission/gate.js';
import type { LoadConfig } from '../config/sidecar-config.js';
import type { Logger } from '../log.js';
import type { TrafficTap } from '../proxy/call-context.js';
import type { IncomingHttpHeaders } from 'node:http2';
import { EngineScraper } from './engine-scraper.js';
import { mirrorCounter, registerLoadMetrics } from './load-metrics.js';
import { LoadTracker, type LoadEvent } from './load-tracker.js';
import { LoadPublisher, defaultWorkerId, loadSubject } from './publisher.js';
import { TrafficAccounting } from './traffic-accounting.js';

export interface LoadReportingDeps {
  readonly config: LoadConfig;
  readonly gate: AdmissionGate;
  /** Configured limit and queue, or undefined when admission is off. */
  readonly admission: { readonly limit: number; readonly queueLimit: number } | undefined;
  readonly listenPort: number;
  /** Scrape this when no --engine-metrics-url is given (the embedded engine in demo mode). */
  readonly defaultEngineMetricsUrl?: string;
  readonly registry: Registry;
  readonly logger: Logger;
}

export class LoadReporting {
  readonly tracker: LoadTracker;
  readonly subject: string;
  readonly workerId: number;
  private readonly accounting: TrafficAccounting;
  private readonly scraper: EngineScraper | undefined;
  private readonly publisher: LoadPublisher | undefined;

  constructor(private readonly deps: LoadReportingDeps) {
    const { config, logger } = deps;
    this.workerId = config.workerId ?? defaultWorkerId(hostname(), deps.listenPort);
    this.subject = loadSubject(config.namespace, config.component, config.endpoint);
    this.tracker = new LoadTracker({
      workerId: this.workerId,
      dataParallelSize: config.dataParallelSize,
      kvTotalBlocks: config.kvTotalBlocks,
      kvBlockSize: config.kvBlockSize,
      maxNumBatchedTokens: config.maxNumBatchedTokens,
      trackOutputBlocks: config.trackOutputBlocks,
    });
    this.accounting = new TrafficAccounting(this.tracker, config.dataParallelSize);
    this.syncAdmission();

    const metricsUrl = config.engineMetricsUrl ?? deps.defaultEngineMetricsUrl;
    if (metricsUrl) {
      const scraper: EngineScraper = new EngineScraper({
        url: metricsUrl,
        intervalMs: config.scrapeIntervalMs,
        format: config.engineMetricsFormat,
        logger: logger.child({ component: 'engine-scrape' }),
        onUpdate: () => this.tracker.applyScrape(scraper.ranks, scraper.stale),
      });
      this.scraper = scraper;
    }
    if (config.natsServers) {
      this.publisher = new LoadPublisher({
        servers: [...config.natsServers],
        subject: this.subject,
        source: this.tracker,
        heartbeatMs: config.loadHeartbeatMs,
        livenessTimeoutMs: config.natsLivenessTimeoutMs,
        name: `dynamo-sidecar-${this.workerId}`,
        logger: logger.child({ component: 'nats' }),
      });
    }
    registerLoadMetrics(deps.registry, this.tracker, this.scraper, this.publisher);
    mirrorCounter(
      deps.registry,
      'dynamo_sidecar_generate_unparsed_messages_total',
      'Generate messages the traffic accounting could not decode (compressed, oversized, malformed); the calls were forwarded untouched.',
      () => this.accounting.unparsedMessages,
    );
  }

  start(): void {
    this.scraper?.start();
    this.publisher?.start();
  }

  /** The gate changed: keep the tracker's admission fields current (cheap; the publisher debounces). */
  syncAdmission(): void {
    const { gate, admission } = this.deps;
    this.tracker.setAdmission({ engineRequest: gate.inEngine, requestQueue: gate.queued, limit: admission?.limit, queueLimit: admission?.queueLimit });
  }

  /** A call was rejected: the first rejection of a burst is published at once, not after the debounce. */
  rejected(): void {
    const wasOverloaded = this.tracker.overloaded;
    this.tracker.markRejected();
    if (!wasOverloaded) this.publisher?.publishNow();
  }

  tap(headers: IncomingHttpHeaders): TrafficTap | undefined {
    return this.accounting.tap(headers);
  }

  /** Output tokens seen on Generate calls so far (for the status line's tokens/s). */
  get outputTokens(): number {
    return this.accounting.outputTokens;
  }

  setDraining(): void {
    this.tracker.setDraining(true);
    this.publisher?.publishNow();
  }

  /** The latest state, as served by GET /load; does not advance sequence numbers. */
  current(): LoadEvent[] {
    return this.tracker.peek();
  }

  async close(): Promise<void> {
    this.scraper?.stop();
    await this.publisher?.close();
  }
}
