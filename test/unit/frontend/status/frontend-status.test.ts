/** The frontend's status snapshot: fleet, thresholds, admin placement and rates in one frame shared by every page. */
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { ThresholdStore } from '../../../../src/frontend/routing/thresholds.js';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { frontendStatusHub } from '../../../../src/frontend/status/frontend-status.js';
import { FakeSseResponse } from '../../../support/fake-sse-response.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('frontendStatusHub', () => {
  it('streams one snapshot per tick with the fleet, the thresholds and where the admin API is', async () => {
    vi.useFakeTimers();
    const pool = new WorkerPool({ defaultHeartbeatMs: 1000, leaseMs: 1000, maxWorkers: 10 });
    pool.apply(parseRankReport({ worker_id: 1, model: 'm', grpc_address: '127.0.0.1:1', kv_total_blocks: 8 }), 0, 'push');
    const thresholds = new ThresholdStore({
      active_decode_blocks_threshold: 0.9,
      active_prefill_tokens_threshold: null,
      active_prefill_tokens_threshold_frac: null,
    });
    const hub = frontendStatusHub({
      pool,
      thresholds,
      maxPredictedTtftMs: null,
      registry: new Registry(),
      admin: 'elsewhere',
      overloadStatus: 529,
      now: () => 500,
    });
    hub.start();
    const a = new FakeSseResponse();
    const b = new FakeSseResponse();
    hub.attach(a.asResponse());
    hub.attach(b.asResponse());
    await vi.advanceTimersByTimeAsync(1000);
    const frames = a.frames() as Record<string, unknown>[];
    expect(frames).toHaveLength(2);
    expect(b.frames()).toEqual(frames);
    expect(frames[1]).toMatchObject({
      kind: 'frontend',
      started: 500,
      time: 500,
      interval_ms: 1000,
      admin: 'elsewhere',
      overload_status: 529,
      models: [{ model: 'm', workers: 1, busy: 0, thresholds: { active_decode_blocks_threshold: 0.9 } }],
      workers: [{ id: '1', state: 'free' }],
      rates: { overload: 0 },
      history: { t: expect.any(Array), series: expect.any(Object) },
    });
    hub.close();
    expect(a.ended && b.ended).toBe(true);
  });
});
