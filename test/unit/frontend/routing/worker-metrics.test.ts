// The frontend's worker gauges, read from the pool and the router at scrape time.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { registerWorkerMetrics, type LoadSourceStats } from '../../../../src/frontend/routing/worker-metrics.js';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';

type BusyRouter = Parameters<typeof registerWorkerMetrics>[2];

/** The one router method the gauges read. */
function fakeRouter(summary: Map<string, { workers: number; busy: number }>): BusyRouter {
  return { busySummary: () => summary } as unknown as BusyRouter;
}

function setup(sources: LoadSourceStats[] = [], summary = new Map<string, { workers: number; busy: number }>()) {
  const registry = new Registry();
  const pool = new WorkerPool({ defaultHeartbeatMs: 100, leaseMs: 1000, maxWorkers: 10 });
  const clock = { now: 0 };
  registerWorkerMetrics(registry, pool, fakeRouter(summary), () => clock.now, sources);
  const values = async (name: string) => {
    const metric = await registry.getSingleMetric(name)!.get();
    return metric.values.map(({ labels, value }) => ({ labels, value }));
  };
  return { registry, pool, clock, values };
}

describe('registerWorkerMetrics', () => {
  it('counts load events by source and result, read from the live stats', async () => {
    const stats = { events: 3, invalid: 1, refused: 2, ranksRefused: 0 };
    const { values } = setup([{ source: 'nats', stats, connected: true }]);
    expect(await values('dynamo_frontend_load_events_total')).toEqual([
      { labels: { source: 'nats', result: 'applied' }, value: 3 },
      { labels: { source: 'nats', result: 'invalid' }, value: 1 },
      { labels: { source: 'nats', result: 'refused' }, value: 2 },
    ]);
    stats.events = 10;
    expect((await values('dynamo_frontend_load_events_total'))[0]!.value).toBe(10);
  });

  it('counts rank reports refused beyond the per-worker rank cap, by source, read from the live stats', async () => {
    const nats = { events: 0, invalid: 0, refused: 0, ranksRefused: 76 };
    const push = { events: 0, invalid: 0, refused: 0, ranksRefused: 0 };
    const { values } = setup([
      { source: 'nats', stats: nats, connected: true },
      { source: 'push', stats: push, connected: true },
    ]);
    push.ranksRefused = 18_976;
    expect(await values('dynamo_frontend_load_ranks_refused_total')).toEqual([
      { labels: { source: 'nats' }, value: 76 },
      { labels: { source: 'push' }, value: 18_976 },
    ]);
  });

  it('reports NATS as connected or not, and push as the number of connected --worker streams', async () => {
    const nats = { source: 'nats' as const, stats: { events: 0, invalid: 0, refused: 0, ranksRefused: 0 }, connected: false };
    const push = { source: 'push' as const, stats: { events: 0, invalid: 0, refused: 0, ranksRefused: 0 }, connected: true };
    const { pool, values } = setup([nats, push]);
    pool.apply(parseRankReport({ worker_id: 1 }), 0, 'push', 'a:1');
    pool.apply(parseRankReport({ worker_id: 2 }), 0, 'push', 'b:1');
    pool.disconnected('2');
    expect(await values('dynamo_frontend_load_source_connected')).toEqual([
      { labels: { source: 'nats' }, value: 0 },
      { labels: { source: 'push' }, value: 1 },
    ]);
  });

  it('exports each fresh rank, preferring kv_used_blocks to active_decode_blocks', async () => {
    const { pool, values } = setup();
    pool.apply(parseRankReport({ worker_id: 7, dp_rank: 0, active_decode_blocks: 4, kv_used_blocks: 9, active_prefill_tokens: 30 }), 0, 'nats');
    pool.apply(parseRankReport({ worker_id: 7, dp_rank: 1, active_decode_blocks: 2 }), 0, 'nats');
    expect(await values('dynamo_frontend_worker_active_decode_blocks')).toEqual([
      { labels: { worker_id: '7', dp_rank: '0' }, value: 9 },
      { labels: { worker_id: '7', dp_rank: '1' }, value: 2 },
    ]);
    // A rank that does not report prefill tokens has no series rather than a 0.
    expect(await values('dynamo_frontend_worker_active_prefill_tokens')).toEqual([{ labels: { worker_id: '7', dp_rank: '0' }, value: 30 }]);
  });

  it('exports a fresh predicted_ttft_ms in seconds, and no series for an unknown or stale one', async () => {
    const { pool, clock, values } = setup();
    pool.apply(parseRankReport({ worker_id: 7, predicted_ttft_ms: 180 }), 0, 'nats');
    pool.apply(parseRankReport({ worker_id: 8, predicted_ttft_ms: null }), 0, 'nats');
    pool.apply(parseRankReport({ worker_id: 9, predicted_ttft_ms: 40 }), 250, 'nats');
    expect(await values('dynamo_frontend_worker_predicted_ttft_seconds')).toEqual([
      { labels: { worker_id: '7', dp_rank: '0' }, value: 0.18 },
      { labels: { worker_id: '9', dp_rank: '0' }, value: 0.04 },
    ]);
    clock.now = 301;
    expect(await values('dynamo_frontend_worker_predicted_ttft_seconds')).toEqual([{ labels: { worker_id: '9', dp_rank: '0' }, value: 0.04 }]);
  });

  it('drops the series of a stale rank and of a forgotten worker at the next scrape', async () => {
    const { pool, clock, values } = setup();
    pool.apply(parseRankReport({ worker_id: 7, active_decode_blocks: 4 }), 0, 'nats');
    pool.apply(parseRankReport({ worker_id: 8, active_decode_blocks: 5 }), 250, 'nats');
    clock.now = 301;
    expect(await values('dynamo_frontend_worker_active_decode_blocks')).toEqual([{ labels: { worker_id: '8', dp_rank: '0' }, value: 5 }]);
    pool.forget('8');
    expect(await values('dynamo_frontend_worker_active_decode_blocks')).toEqual([]);
  });

  it('exports routable and busy workers per model from the router', async () => {
    const summary = new Map([
      ['a', { workers: 3, busy: 1 }],
      ['b', { workers: 1, busy: 0 }],
    ]);
    const { values } = setup([], summary);
    expect(await values('dynamo_frontend_workers')).toEqual([
      { labels: { model: 'a' }, value: 3 },
      { labels: { model: 'b' }, value: 1 },
    ]);
    expect(await values('dynamo_frontend_busy_workers')).toEqual([
      { labels: { model: 'a' }, value: 1 },
      { labels: { model: 'b' }, value: 0 },
    ]);
    summary.delete('a');
    expect(await values('dynamo_frontend_workers')).toEqual([{ labels: { model: 'b' }, value: 1 }]);
  });

  it('renders as valid exposition text with every family named', async () => {
    const { registry } = setup();
    const text = await registry.metrics();
    for (const name of [
      'dynamo_frontend_load_events_total',
      'dynamo_frontend_load_source_connected',
      'dynamo_frontend_worker_active_decode_blocks',
      'dynamo_frontend_worker_active_prefill_tokens',
      'dynamo_frontend_worker_predicted_ttft_seconds',
      'dynamo_frontend_workers',
      'dynamo_frontend_busy_workers',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
  });
});
