import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerLoadMetrics } from '../../../../src/sidecar/load/load-metrics.js';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';

function setup(): {
  registry: Registry;
  scraper: { source: 'scrape' | 'getloads'; errors: number; stale: boolean; unsupported: boolean; ranks: Map<number, { kvUsagePerc?: number }> };
  publisher: { stats: { published: number; failures: number }; connected: boolean; pending: number };
} {
  const tracker = new LoadTracker({ workerId: 1, dataParallelSize: 2, kvTotalBlocks: 100 });
  tracker.applyScrape(new Map([[0, { kvUsedBlocks: 25, kvTotalBlocks: 200, kvUsagePerc: 0.125 }]]), false);
  const scraper: ReturnType<typeof setup>['scraper'] = {
    source: 'scrape',
    errors: 3,
    stale: false,
    unsupported: false,
    ranks: new Map([[0, { kvUsagePerc: 0.125 }]]),
  };
  const publisher = { stats: { published: 10, failures: 2 }, connected: true, pending: 0 };
  const registry = new Registry();
  registerLoadMetrics(registry, tracker, scraper, publisher);
  return { registry, scraper, publisher };
}

describe('registerLoadMetrics', () => {
  it('reads current values at scrape time', async () => {
    const { registry, scraper, publisher } = setup();
    let text = await registry.metrics();
    expect(text).toContain('dynamo_component_total_blocks{dp_rank="0"} 200');
    expect(text).toContain('dynamo_component_total_blocks{dp_rank="1"} 100');
    expect(text).toContain('dynamo_component_gpu_cache_usage_percent{dp_rank="0"} 0.125');
    expect(text).not.toContain('dynamo_component_gpu_cache_usage_percent{dp_rank="1"}');
    expect(text).toContain('dynamo_sidecar_engine_scrape_errors_total 3');
    expect(text).toContain('dynamo_sidecar_load_events_published_total 10');
    expect(text).toContain('dynamo_sidecar_nats_connected 1');
    expect(text).toContain('dynamo_sidecar_load_events_unconfirmed 0');
    scraper.errors = 5;
    scraper.stale = true;
    publisher.stats.published = 12;
    publisher.connected = false;
    publisher.pending = 2;
    text = await registry.metrics();
    expect(text).toContain('dynamo_sidecar_engine_scrape_errors_total 5');
    expect(text).toContain('dynamo_sidecar_engine_scrape_stale 1');
    expect(text).toContain('dynamo_sidecar_load_events_published_total 12');
    expect(text).toContain('dynamo_sidecar_nats_connected 0');
    expect(text).toContain('dynamo_sidecar_load_events_unconfirmed 2');
  });

  it('names the KV source in use, and traffic once the engine has none', async () => {
    const { registry, scraper } = setup();
    expect(await registry.metrics()).toContain('dynamo_sidecar_engine_load_source{source="scrape"} 1');
    scraper.source = 'getloads';
    expect(await registry.metrics()).toContain('dynamo_sidecar_engine_load_source{source="getloads"} 1');
    scraper.unsupported = true;
    const text = await registry.metrics();
    expect(text).toContain('dynamo_sidecar_engine_load_source{source="traffic"} 1');
    expect(text).not.toContain('source="getloads"');
    const bare = new Registry();
    registerLoadMetrics(bare, new LoadTracker({ workerId: 1 }));
    expect(await bare.metrics()).toContain('dynamo_sidecar_engine_load_source{source="traffic"} 1');
  });
});
