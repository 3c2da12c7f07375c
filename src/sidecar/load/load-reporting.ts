/**
 * Load reporting, composed from one LoadConfig: the tracker, its sources (the engine's KV
 * load, Generate traffic accounting, static flags, and what the engine tells about itself:
 * EngineDiscovery, for the model, KV geometry, batched tokens and dp size), the two ways out (NATS publisher, WorkerLoad/Watch push on the
 * ingress port) and their metrics. The proxy sees only the small surface below; none of it
 * ever waits on the network.
 *
 * Sources and their precedence (docs/architecture.md, "Where the load comes from"):
 * - active_decode_blocks, active_prefill_tokens: always the Generate traffic, never an engine
 *   report (they are the router's view of work in flight, as in Dynamo).
 * - kv_used_blocks, kv_total_blocks: exactly one KV source, fixed at startup by
 *   --engine-load-source (`kvSource` below): the engine's /metrics (scrape), its GetLoads RPC
 *   (getloads), or none (traffic). `auto` takes scrape when a metrics URL is known, else
 *   GetLoads, and GetLoads answered UNIMPLEMENTED leaves it at none. Two sources are never
 *   mixed, so two numbers for one field can never alternate (Dynamo issue 7753).
 * - kv_total_blocks falls back to --kv-total-blocks when the source gives none, then to what
 *   the engine told (EngineDiscovery); kv_used_blocks is null whenever the source is stale or absent.
 * - Flags win over what the engine tells: --served-model-name, --kv-total-blocks,
 *   --kv-block-size, --max-num-batched-tokens and --data-parallel-size, when given, are kept.
 */
import { hostname } from 'node:os';
import type { Registry } from 'prom-client';
import type { AdmissionGate } from '../admission/gate.js';
import type { CallClass } from '../admission/waiting-room.js';
import type { LoadConfig } from '../config/sidecar-config.js';
import type { Logger } from '../../platform/log.js';
import type { TrafficTap } from '../proxy/call-context.js';
import type { IncomingHttpHeaders } from 'node:http2';
import { EngineScraper, defaultReadTimeoutMs } from './engine-scraper.js';
import { getLoadsPath, getLoadsReader } from './engine-get-loads.js';
import { mirrorCounter, registerLoadMetrics } from './load-metrics.js';
import { emptyAdmissionState, LoadTracker, type AdmissionState } from './load-tracker.js';
import { type LoadEvent } from '../../protocol/load-event.js';
import { EngineDiscovery } from './engine-discovery.js';
import type { QuestionedEngine } from './engine-question.js';
import type { EngineFacts } from '../../protocol/engine/engine-facts.js';
import { LoadPublisher, defaultWorkerId } from './publisher.js';
import { loadSubject } from '../../protocol/load-event.js';
import { TrafficAccounting } from './traffic-accounting.js';
import { WorkerLoadService } from './worker-load-service.js';

export interface LoadReportingDeps {
  readonly config: LoadConfig;
  /** Its counts, and its limits (which may change live; `Infinity`: admission off). */
  readonly gate: AdmissionGate;
  readonly listenPort: number;
  /** The engine connection, asked what the engine is (EngineDiscovery) and, with getloads, its load. */
  readonly engine: QuestionedEngine;
  /** Scrape this when no --engine-metrics-url is given (the embedded engine in demo mode). */
  readonly defaultEngineMetricsUrl?: string | undefined;
  readonly registry: Registry;
  readonly logger: Logger;
  /** The events' predicted_ttft_ms (RetryPushback.predictedTtftMs). */
  readonly predictTtftMs?: () => number | undefined;
  /** Of the free queue places, those a call would be let into for its expected wait (admit_now, admit-now.ts). */
  readonly queuePlaces?: () => number | undefined;
}

/** The KV source actually in use ('traffic': none). */
export type KvSource = 'scrape' | 'getloads' | 'traffic';

export class LoadReporting {
  readonly tracker: LoadTracker;
  readonly kvSource: KvSource;
  readonly subject: string;
  private readonly accounting: TrafficAccounting;
  private readonly admissionState: AdmissionState = emptyAdmissionState();
  private readonly scraper: EngineScraper | undefined;
  private readonly publisher: LoadPublisher | undefined;
  /** What the engine tells about itself; others (the auto engine request limit) listen too. */
  readonly discovery: EngineDiscovery;
  private modelWarned = false;
  private startRankWarned = false;
  /** dynamo.sidecar.v1.WorkerLoad, for the ingress to answer. */
  readonly watchService: WorkerLoadService;

  constructor(private readonly deps: LoadReportingDeps) {
    const { config, logger } = deps;
    const workerId = config.workerId ?? defaultWorkerId(hostname(), deps.listenPort);
    this.subject = loadSubject(config.namespace, config.component, config.endpoint);
    this.tracker = new LoadTracker({
      workerId,
      dataParallelSize: config.dataParallelSize,
      kvTotalBlocks: config.kvTotalBlocks,
      kvBlockSize: config.kvBlockSize,
      maxNumBatchedTokens: config.maxNumBatchedTokens,
      trackOutputBlocks: config.trackOutputBlocks,
      heartbeatMs: config.loadHeartbeatMs,
      model: config.servedModelName,
      predictTtftMs: deps.predictTtftMs,
      refusedWhenFull: () => deps.gate.refusedWhenFull(),
    });
    this.accounting = new TrafficAccounting(this.tracker, config.generateWire);
    this.syncAdmission();

    const metricsUrl = config.engineMetricsUrl ?? deps.defaultEngineMetricsUrl;
    const source = config.engineLoadSource;
    const loadsPath = getLoadsPath(config.generateWire);
    this.kvSource = source === 'auto' ? (metricsUrl ? 'scrape' : loadsPath ? 'getloads' : 'traffic') : source;
    const onUpdate = (): void => this.tracker.applyScrape(this.scraper!.ranks, this.scraper!.stale);
    if (this.kvSource === 'scrape' && metricsUrl) {
      this.scraper = new EngineScraper({
        url: metricsUrl,
        intervalMs: config.scrapeIntervalMs,
        format: config.engineMetricsFormat,
        logger: logger.child({ component: 'engine-scrape' }),
        onUpdate,
      });
    } else if (this.kvSource === 'getloads' && loadsPath) {
      const timeoutMs = defaultReadTimeoutMs(config.scrapeIntervalMs);
      this.scraper = new EngineScraper({
        url: loadsPath,
        source: 'getloads',
        read: getLoadsReader({
          open: (headers) => deps.engine.request(headers),
          wire: config.generateWire,
          kvBlockSize: config.kvBlockSize,
          kvTotalBlocks: () => this.tracker.kvTotalBlocks,
          timeoutMs,
        }),
        intervalMs: config.scrapeIntervalMs,
        timeoutMs,
        logger: logger.child({ component: 'engine-get-loads' }),
        onUpdate,
      });
    }
    if (config.natsServers) {
      this.publisher = new LoadPublisher({
        servers: [...config.natsServers],
        subject: this.subject,
        source: this.tracker,
        heartbeatMs: config.loadHeartbeatMs,
        livenessTimeoutMs: config.natsLivenessTimeoutMs,
        format: config.eventFormat,
        name: `dynamo-sidecar-${workerId}`,
        security: config.natsSecurity,
        logger: logger.child({ component: 'nats' }),
      });
      if (config.eventFormat === 'dynamo')
        logger.warn(
          "--event-format dynamo: load events on NATS are Dynamo's ActiveLoad envelopes; this project's frontend reads only --event-format json and ignores them",
          {
            subject: this.subject,
            publisher_id: this.publisher.publisherId,
          },
        );
    }
    this.discovery = new EngineDiscovery({ engine: deps.engine, wire: config.generateWire, logger: logger.child({ component: 'engine-discovery' }) });
    this.discovery.onFacts((facts, round) => this.applyEngineFacts(facts, round.complete));
    this.watchService = new WorkerLoadService({ source: this.tracker, heartbeatMs: config.loadHeartbeatMs });
    registerLoadMetrics(deps.registry, this.tracker, this.scraper, this.publisher, this.watchService);
    mirrorCounter(
      deps.registry,
      'dynamo_sidecar_generate_output_tokens_total',
      "Output tokens the traffic accounting counted on the engine's Generate calls (as the engine reports them: new ids, or its running total).",
      () => this.accounting.outputTokens,
    );
    mirrorCounter(
      deps.registry,
      'dynamo_sidecar_generate_unparsed_messages_total',
      'Generate messages the traffic accounting could not decode (compressed, oversized, malformed); the calls were forwarded untouched.',
      () => this.accounting.unparsedMessages,
    );
    mirrorCounter(
      deps.registry,
      'dynamo_sidecar_invalid_dp_rank_total',
      'Generate calls whose dp rank (request field or header) is not a rank of this worker; counted on rank 0.',
      () => this.accounting.invalidRanks,
    );
  }

  /**
   * The ingress is bound: events carry where frontends reach it (grpc_address), and a default
   * worker id hashes the bound port, so sidecars listening on port 0 never share an id.
   * Call before start().
   */
  bound(grpcAddress: string, boundPort: number): void {
    this.tracker.setGrpcAddress(grpcAddress);
    if (this.deps.config.workerId === undefined) this.tracker.setWorkerId(defaultWorkerId(hostname(), boundPort));
  }

  get workerId(): number {
    return this.tracker.workerId;
  }

  start(): void {
    this.scraper?.start();
    this.publisher?.start();
    this.discovery.start();
  }

  /** The gate changed: keep the tracker's admission fields current (cheap; the publisher debounces). */
  syncAdmission(): void {
    const { gate } = this.deps;
    const on = gate.limit !== Infinity;
    // One object, refilled: this runs twice per call (acquire and release); the tracker copies the fields.
    const state = this.admissionState;
    state.engineRequest = gate.inEngine;
    state.requestQueue = gate.queued;
    state.limit = on ? gate.limit : undefined;
    state.queueLimit = on ? gate.queueLimit : undefined;
    state.hasRoom = gate.hasRoom;
    state.queuePlaces = on ? this.deps.queuePlaces?.() : undefined;
    this.tracker.setAdmission(state);
  }

  /** N or Q changed (admin API, SIGHUP): frontends learn the new engine_request_limit at once, as on a rejection. */
  admissionChanged(): void {
    this.syncAdmission();
    this.publisher?.publishNow();
    this.watchService.publishNow();
  }

  /**
   * A call was rejected: the first rejection of a burst is published at once, not after the debounce.
   * `untilAdmittable`: refused with queue places left (expected wait, queue timeout), so the worker
   * stays overloaded until a call would be admitted at once (load-tracker.ts, (b)). `callClass`:
   * whom it refused, for the event's overloaded_priority and overloaded_tenants.
   */
  rejected(options: { untilAdmittable?: boolean; callClass?: CallClass } = {}): void {
    const wasOverloaded = this.tracker.overloaded;
    this.tracker.markRejected(options);
    if (!wasOverloaded) {
      this.publisher?.publishNow();
      this.watchService.publishNow();
    }
  }

  /** Tells `listener` the output of every Generate call that completed (--ttft-slo-ms learns output lengths from it). */
  onCallCompleted(listener: (outputTokens: number) => void): void {
    this.accounting.onCompleted = listener;
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
    this.watchService.publishNow();
  }

  /**
   * What the engine told applies where no flag says otherwise. SGLang's output ids are all ids
   * so far unless it says it streams deltas: its default, and the safe reading (a delta read as a
   * total only undercounts).
   */
  applyEngineFacts(facts: Readonly<EngineFacts>, complete: boolean): void {
    const { config } = this.deps;
    if (config.servedModelName === undefined) {
      if (facts.model !== undefined) this.tracker.setModel(facts.model);
      else if (complete && !this.modelWarned) {
        this.modelWarned = true;
        this.deps.logger.warn('the engine did not tell its model: model unknown (null in load events); pass --served-model-name');
      }
    }
    this.tracker.learn({
      kvTotalBlocks: config.kvTotalBlocks === undefined ? facts.kvTotalBlocks : undefined,
      kvBlockSize: config.setByOperator.kvBlockSize ? undefined : facts.kvBlockSize,
      maxNumBatchedTokens: config.maxNumBatchedTokens === undefined ? facts.maxNumBatchedTokens : undefined,
      dataParallelSize: config.setByOperator.dataParallelSize ? undefined : facts.dataParallelSize,
    });
    this.accounting.cumulativeOutputIds = facts.incrementalOutput !== true;
    if ((facts.dataParallelStartRank ?? 0) > 0 && !this.startRankWarned) {
      // Dynamo's own vLLM sidecar refuses such an engine; we serve it, but number ranks from 0.
      this.startRankWarned = true;
      this.deps.logger.warn(
        'the engine hosts dp ranks from a first rank above 0 (multi-node data parallelism); load events and x-data-parallel-rank number its ranks from 0',
        {
          data_parallel_start_rank: facts.dataParallelStartRank,
        },
      );
    }
  }

  /** The latest state, as served by GET /load; does not advance sequence numbers. */
  current(): LoadEvent[] {
    return this.tracker.peek();
  }

  async close(): Promise<void> {
    this.scraper?.stop();
    this.discovery.stop();
    this.watchService.close();
    await this.publisher?.close();
  }
}
