/** fleetView: each worker's state by the router's own rules, the numbers behind a fired check, lease time left, and rows per model. */
import { describe, expect, it } from 'vitest';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { ThresholdStore } from '../../../../src/frontend/routing/thresholds.js';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { fleetView } from '../../../../src/frontend/status/fleet-view.js';

const HEARTBEAT = 1000;
const OFF = { active_decode_blocks_threshold: null, active_prefill_tokens_threshold: null, active_prefill_tokens_threshold_frac: null };

function setup() {
  const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: 1000, maxWorkers: 100 });
  const thresholds = new ThresholdStore({ ...OFF, active_decode_blocks_threshold: 0.5 });
  const report = (id: number, fields: Record<string, unknown> = {}) =>
    parseRankReport({ worker_id: id, model: 'm', grpc_address: `127.0.0.1:${5000 + id}`, heartbeat_ms: HEARTBEAT, kv_total_blocks: 100, ...fields });
  return { pool, thresholds, report, view: (now: number) => fleetView({ pool, thresholds, maxPredictedTtftMs: null }, now) };
}

describe('fleetView', () => {
  it('shows a free worker with its load, and a busy one with the check that fired and its numbers', () => {
    const { pool, report, view } = setup();
    pool.apply(report(1, { kv_used_blocks: 10, active_prefill_tokens: 7, engine_request: 3, engine_request_limit: 12, request_queue: 1 }), 0, 'push');
    pool.apply(report(2, { kv_used_blocks: 60 }), 0, 'push');
    const { workers, models } = view(100);
    expect(workers[0]).toMatchObject({
      id: '1',
      address: '127.0.0.1:5001',
      model: 'm',
      state: 'free',
      fired: [],
      engineRequest: 3,
      engineRequestLimit: 12,
      requestQueue: 1,
      lastEventAgeMs: 100,
      ranks: [{ rank: 0, fresh: true, usedBlocks: 10, totalBlocks: 100, prefillTokens: 7, busy: false }],
    });
    expect(workers[1]).toMatchObject({
      id: '2',
      state: 'busy',
      fired: [{ check: 'active_decode_blocks_threshold', rank: 0, value: 60, threshold: 0.5, limit: 50 }],
    });
    expect(models).toEqual([{ model: 'm', thresholds: { ...OFF, active_decode_blocks_threshold: 0.5 }, priorityScales: [], workers: 2, busy: 1 }]);
  });

  it('shows each worker its credit, and no_credit once this frontend spent it; null for a worker that gives none', () => {
    const { pool, report, view } = setup();
    pool.apply(report(1, { engine_request_limit: 4, request_queue_limit: 0, admit_now: 1 }), 0, 'push');
    pool.apply(report(2), 0, 'push');
    expect(view(10).workers.map((w) => [w.state, w.credit])).toEqual([
      ['free', 1],
      ['free', null],
    ]);
    pool.get('1')!.credit.send();
    expect(view(10).workers[0]).toMatchObject({ state: 'no_credit', credit: 0 });
    // Stale load: no credit holds it back.
    expect(view(3 * HEARTBEAT + 1).workers[0]!.state).toBe('stale');
  });

  it('is busy only when every rank is', () => {
    const { pool, report, view } = setup();
    pool.apply(report(1, { dp_rank: 0, kv_used_blocks: 60 }), 0, 'push');
    pool.apply(report(1, { dp_rank: 1, kv_used_blocks: 1 }), 0, 'push');
    expect(view(0).workers[0]).toMatchObject({
      state: 'free',
      ranks: [
        { rank: 0, busy: true },
        { rank: 1, busy: false },
      ],
    });
  });

  it('shows a refused worker as leased with the time left, then as itself once the lease is over', () => {
    const { pool, report, view } = setup();
    pool.apply(report(1), 0, 'push');
    pool.markOverloaded('1', 100);
    expect(view(400).workers[0]).toMatchObject({ state: 'leased', leaseLeftMs: 700 });
    expect(view(1200).workers[0]).toMatchObject({ state: 'free', leaseLeftMs: null });
  });

  it('shows unreachable (stream down, or an UNAVAILABLE lease), draining, and stale load', () => {
    const { pool, report, view } = setup();
    pool.apply(report(1), 0, 'push');
    pool.apply(report(2), 0, 'push');
    pool.apply(report(3, { draining: true }), 0, 'push');
    pool.apply(report(4, { kv_used_blocks: 99 }), 0, 'nats');
    pool.disconnected('1');
    pool.markUnreachable('2', 0);
    const states = view(500).workers.map((w) => [w.id, w.state, w.leaseLeftMs]);
    expect(states).toEqual([
      ['1', 'unreachable', null],
      ['2', 'unreachable', 500],
      ['3', 'draining', null],
      ['4', 'busy', null],
    ]);
    // No event for more than 3 heartbeats: stale, which routing treats as free.
    expect(view(5000).workers[3]).toMatchObject({ id: '4', state: 'stale', ranks: [{ fresh: false, usedBlocks: 99 }] });
  });

  it('orders workers by numeric id and takes a threshold change at once', () => {
    const { pool, report, view, thresholds } = setup();
    for (const id of [10, 9, 100]) pool.apply(report(id, { kv_used_blocks: 30 }), 0, 'push');
    expect(view(0).workers.map((w) => w.id)).toEqual(['9', '10', '100']);
    thresholds.update('m', { active_decode_blocks_threshold: 0.2 });
    expect(view(0).workers.every((w) => w.state === 'busy')).toBe(true);
  });
});
