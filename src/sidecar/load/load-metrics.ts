/**
 * Prometheus metrics for load tracking, read at scrape time (prom-client collect callbacks),
 * so the hot path pays nothing for them.
 *
 *   registerLoadMetrics(registry, tracker, scraper?, publisher?)
 *
 * Always:      dynamo_component_total_blocks{dp_rank}, dynamo_component_gpu_cache_usage_percent{dp_rank}
 *              (Dynamo's names; the latter is a 0..1 ratio like vLLM's *_perc, from the fresh
 *              scrape's kv_used/kv_total, absent when unknown).
 *              dynamo_sidecar_engine_load_source{source} = 1 for the KV source in use
 *              (scrape, getloads, traffic = none; see load-reporting.ts).
 * With scraper: dynamo_sidecar_engine_scrape_errors_total, dynamo_sidecar_engine_scrape_stale,
 *              dynamo_sidecar_engine_kv_usage_ratio{dp_rank} (last scraped value); the
 *              "scraper" is whichever KV source polls the engine (/metrics or GetLoads).
 * With publisher: dynamo_sidecar_load_events_published_total (confirmed by the server),
 *              dynamo_sidecar_load_publish_failures_total, dynamo_sidecar_nats_connected (0 while
 *              disconnected or stalled; see publisher.ts for the liveness rules),
 *              dynamo_sidecar_load_events_unconfirmed (handed over, confirmation outstanding).
 * With the WorkerLoad service: dynamo_sidecar_load_watchers (open Watch streams),
 *              dynamo_sidecar_load_watch_updates_total, dynamo_sidecar_load_watch_updates_skipped_total
 *              (not written because the watcher's stream was full; the latest state follows).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ScrapedLoad } from './engine-metrics-reader.js';
import type { LoadEvent } from '../../protocol/load-event.js';

export interface LoadView {
  peek(): LoadEvent[];
}
export interface ScrapeView {
  readonly source: 'scrape' | 'getloads';
  readonly errors: number;
  readonly unsupported: boolean;
  readonly stale: boolean;
  readonly ranks: ReadonlyMap<number, ScrapedLoad>;
}
export interface PublishView {
  readonly stats: { readonly published: number; readonly failures: number };
  readonly connected: boolean;
  /** Events handed to the NATS client and not yet confirmed or given up. */
  readonly pending: number;
}

export interface WatchView {
  readonly stats: { readonly updates: number; readonly skipped: number };
  readonly watcherCount: number;
}

export function registerLoadMetrics(registry: Registry, tracker: LoadView, scraper?: ScrapeView, publisher?: PublishView, watch?: WatchView): void {
  const registers = [registry];
  new Gauge({
    name: 'dynamo_sidecar_engine_load_source',
    help: 'The source of kv_used_blocks/kv_total_blocks in use (value 1): scrape (engine /metrics), getloads (engine GetLoads RPC) or traffic (none).',
    labelNames: ['source'],
    registers,
    collect() {
      this.reset();
      this.set({ source: scraper === undefined || scraper.unsupported ? 'traffic' : scraper.source }, 1);
    },
  });
  new Gauge({
    name: 'dynamo_component_total_blocks',
    help: 'KV-cache blocks available per dp rank (engine scrape or GetLoads, else --kv-total-blocks).',
    labelNames: ['dp_rank'],
    registers,
    collect() {
      this.reset();
      for (const e of tracker.peek()) if (e.kv_total_blocks !== null) this.set({ dp_rank: String(e.dp_rank) }, e.kv_total_blocks);
    },
  });
  new Gauge({
    name: 'dynamo_component_gpu_cache_usage_percent',
    help: 'KV-cache usage per dp rank as a 0..1 ratio (used / total blocks from a fresh engine scrape).',
    labelNames: ['dp_rank'],
    registers,
    collect() {
      this.reset();
      for (const e of tracker.peek()) {
        if (e.kv_used_blocks !== null && e.kv_total_blocks) this.set({ dp_rank: String(e.dp_rank) }, e.kv_used_blocks / e.kv_total_blocks);
      }
    },
  });
  if (scraper) {
    mirrorCounter(
      registry,
      'dynamo_sidecar_engine_scrape_errors_total',
      'Reads of the engine load (/metrics scrape or GetLoads) that failed, timed out or had no KV numbers.',
      () => scraper.errors,
    );
    new Gauge({
      name: 'dynamo_sidecar_engine_scrape_stale',
      help: '1 while the engine load is stale (no good read yet, the last one failed, or the engine has no such source).',
      registers,
      collect() {
        this.set(scraper.stale ? 1 : 0);
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_engine_kv_usage_ratio',
      help: 'Last scraped KV-cache usage ratio (0..1) per dp rank.',
      labelNames: ['dp_rank'],
      registers,
      collect() {
        this.reset();
        for (const [rank, load] of scraper.ranks) if (load.kvUsagePerc !== undefined) this.set({ dp_rank: String(rank) }, load.kvUsagePerc);
      },
    });
  }
  if (publisher) {
    mirrorCounter(
      registry,
      'dynamo_sidecar_load_events_published_total',
      'Load events the NATS server confirmed receiving (a flush answered after them).',
      () => publisher.stats.published,
    );
    mirrorCounter(
      registry,
      'dynamo_sidecar_load_publish_failures_total',
      'Load publishes skipped while NATS was not connected or not answering, that threw, or that the server did not confirm within the liveness timeout.',
      () => publisher.stats.failures,
    );
    new Gauge({
      name: 'dynamo_sidecar_nats_connected',
      help: '1 while the load publisher is connected to NATS and the server confirms publishes within the liveness timeout.',
      registers,
      collect() {
        this.set(publisher.connected ? 1 : 0);
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_load_events_unconfirmed',
      help: 'Load events handed to the NATS client whose confirmation by the server is still outstanding.',
      registers,
      collect() {
        this.set(publisher.pending);
      },
    });
  }
  if (watch) {
    new Gauge({
      name: 'dynamo_sidecar_load_watchers',
      help: 'Open dynamo.sidecar.v1.WorkerLoad/Watch streams (frontends following this worker without a broker).',
      registers,
      collect() {
        this.set(watch.watcherCount);
      },
    });
    mirrorCounter(registry, 'dynamo_sidecar_load_watch_updates_total', 'WorkerLoad updates written to Watch streams.', () => watch.stats.updates);
    mirrorCounter(
      registry,
      'dynamo_sidecar_load_watch_updates_skipped_total',
      'WorkerLoad updates not written because the watcher was not reading (its stream full); it gets the latest state when it drains.',
      () => watch.stats.skipped,
    );
  }
}

/** A counter that mirrors a running total kept elsewhere, read at scrape time. */
export function mirrorCounter(registry: Registry, name: string, help: string, read: () => number): void {
  let seen = 0;
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const now = read();
      if (now > seen) this.inc(now - seen);
      seen = Math.max(seen, now);
    },
  });
}
