/**
 * The frontend's view of its workers as Prometheus gauges, read from the pool at scrape time
 * (so a forgotten worker's series disappear with it): Dynamo's per-rank load gauges, and busy
 * and routable workers per model. Request metrics live in frontend-metrics.ts.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { MAX_DP_RANKS } from '../../protocol/load-event.js';
import type { RankReport } from './load-report.js';
import type { WorkerRouter } from './router.js';
import type { WorkerPool } from './worker-pool.js';

/** Counts kept by a load source, read at scrape time. */
export interface LoadSourceStats {
  readonly source: 'nats' | 'push';
  readonly stats: { readonly events: number; readonly invalid: number; readonly refused: number; readonly ranksRefused: number };
  readonly connected: boolean;
}

export function registerWorkerMetrics(
  registry: Registry,
  pool: WorkerPool,
  router: WorkerRouter,
  now: () => number,
  sources: readonly LoadSourceStats[],
): void {
  new Counter({
    name: 'dynamo_frontend_load_events_total',
    help: 'Load reports (one per worker rank) received, by source and result: applied, invalid (malformed) or refused (a new worker beyond --max-workers).',
    labelNames: ['source', 'result'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { source, stats } of sources) {
        this.inc({ source, result: 'applied' }, stats.events);
        this.inc({ source, result: 'invalid' }, stats.invalid);
        this.inc({ source, result: 'refused' }, stats.refused);
      }
    },
  });
  new Counter({
    name: 'dynamo_frontend_load_ranks_refused_total',
    help: `Rank reports refused, by source, because their worker already had the most ranks a worker may have (${MAX_DP_RANKS}), or past the first ${MAX_DP_RANKS} ranks of one push update; not in dynamo_frontend_load_events_total.`,
    labelNames: ['source'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { source, stats } of sources) this.inc({ source }, stats.ranksRefused);
    },
  });
  new Gauge({
    name: 'dynamo_frontend_load_source_connected',
    help: 'NATS: 1 while connected. push: --worker addresses whose load stream is up.',
    labelNames: ['source'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of sources) this.set({ source: s.source }, s.source === 'nats' ? Number(s.connected) : pool.connectedPushWorkers());
    },
  });
  const rankGauge = (name: string, help: string, value: (report: RankReport) => number | undefined): void =>
    void new Gauge({
      name,
      help,
      labelNames: ['worker_id', 'dp_rank'],
      registers: [registry],
      collect() {
        this.reset();
        const t = now();
        for (const worker of pool.all()) {
          for (const [rank, state] of worker.ranks) {
            const report = pool.freshReport(worker, state, t);
            const v = report === undefined ? undefined : value(report);
            if (v !== undefined) this.set({ worker_id: worker.workerId, dp_rank: String(rank) }, v);
          }
        }
      },
    });
  rankGauge(
    'dynamo_frontend_worker_active_decode_blocks',
    'Latest active decode blocks (kv_used_blocks when the worker reports it) per worker and dp rank; absent when stale.',
    (report) => report.kvUsedBlocks ?? report.activeDecodeBlocks,
  );
  rankGauge(
    'dynamo_frontend_worker_active_prefill_tokens',
    'Latest active prefill tokens per worker and dp rank; absent when stale.',
    (report) => report.activePrefillTokens,
  );
  rankGauge(
    'dynamo_frontend_worker_predicted_ttft_seconds',
    "The worker's latest predicted_ttft_ms (its sidecar's estimate of the wait for a first token), in seconds, per worker and dp rank; absent when unknown or stale.",
    (report) => (report.predictedTtftMs === undefined ? undefined : report.predictedTtftMs / 1000),
  );
  new Gauge({
    name: 'dynamo_frontend_worker_credits',
    help: 'Calls each worker still admits from this frontend until its next load event (its admit_now less the calls sent since); absent for a worker that gives no credit, or whose load is stale.',
    labelNames: ['worker_id'],
    registers: [registry],
    collect() {
      this.reset();
      const t = now();
      for (const worker of pool.all()) {
        const credit = pool.creditOf(worker, t);
        if (credit !== undefined) this.set({ worker_id: worker.workerId }, credit);
      }
    },
  });
  new Gauge({
    name: 'dynamo_frontend_workers',
    help: 'Workers that can take traffic (known, reachable, not draining), per model.',
    labelNames: ['model'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, { workers }] of router.busySummary()) this.set({ model }, workers);
    },
  });
  new Gauge({
    name: 'dynamo_frontend_busy_workers',
    help: 'Of the workers that can take traffic, those busy by the configured thresholds (all ranks busy), per model.',
    labelNames: ['model'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, { busy }] of router.busySummary()) this.set({ model }, busy);
    },
  });
}
