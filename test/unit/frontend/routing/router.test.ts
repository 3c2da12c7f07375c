import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { judgeWorker } from '../../../../src/frontend/routing/busy-rules.js';
import type { RouteTarget, Thresholds } from '../../../../src/frontend/routing/contracts.js';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { WorkerRouter, type RouterMode } from '../../../../src/frontend/routing/router.js';
import { ThresholdStore } from '../../../../src/frontend/routing/thresholds.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';
import { WorkerPool, type LoadSource } from '../../../../src/frontend/routing/worker-pool.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const HEARTBEAT = 100;
const LEASE = 1000;

function setup(options: { mode?: RouterMode; thresholds?: Partial<Thresholds>; trackOutputBlocks?: boolean } = {}) {
  let now = 10_000;
  const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: LEASE, maxWorkers: 100 });
  const logger = recordingLogger();
  const store = new ThresholdStore({ ...THRESHOLDS_OFF, ...options.thresholds });
  const router = new WorkerRouter(
    { mode: options.mode ?? 'least-loaded', kvBlockSize: 16, trackOutputBlocks: options.trackOutputBlocks ?? false, maxPredictedTtftMs: null },
    { pool, thresholds: store, now: () => now, random: mulberry32(1), logger },
  );
  const report = (id: number, fields: Record<string, unknown> = {}, source: LoadSource = 'nats') =>
    pool.apply(
      parseRankReport({ worker_id: id, model: 'm', grpc_address: `127.0.0.1:${5000 + id}`, heartbeat_ms: HEARTBEAT, kv_total_blocks: 64, ...fields }),
      now,
      source,
    );
  return { pool, router, store, logger, report, advance: (ms: number) => (now += ms), now: () => now };
}

const none = new Set<string>();

describe('routing decisions', () => {
  it('no worker at all -> no_workers; a model nobody serves -> unknown_model; only draining/unreachable workers -> unavailable', () => {
    const { router, report } = setup();
    expect(router.route('m', none, 1).kind).toBe('no_workers');
    report(1);
    expect(router.route('other', none, 1).kind).toBe('unknown_model');
    report(1, { draining: true });
    expect(router.route('m', none, 1).kind).toBe('unavailable');
    expect(router.ready()).toBe(false);
  });

  it('routes to a free worker, never to a busy one, and rejects with the counts when all are busy', () => {
    const { router, report } = setup({ thresholds: { active_prefill_tokens_threshold: 10 } });
    report(1, { active_prefill_tokens: 50 });
    report(2, { active_prefill_tokens: 0 });
    for (let i = 0; i < 5; i++) {
      const d = router.route('m', none, 1);
      expect(d.kind === 'route' && d.target.workerId).toBe('2');
    }
    report(2, { active_prefill_tokens: 11 });
    expect(router.route('m', none, 1)).toEqual({
      kind: 'overloaded',
      details: { workers: 2, busy: 2, worker_overloaded: 0, no_credit: 0, tried: 0, checks: { active_prefill_tokens_threshold: 2 } },
    });
  });

  it('a threshold change takes effect on the very next decision, without a new event; DELETE-style disable turns it off', () => {
    const { router, report, store } = setup();
    report(1, { active_decode_blocks: 40 });
    expect(router.route('m', none, 1).kind).toBe('route');
    store.update('m', { active_decode_blocks_threshold: 0.5, active_prefill_tokens_threshold: null });
    expect(router.route('m', none, 1).kind).toBe('overloaded');
    store.disable('m', 'active_decode_blocks_threshold');
    expect(router.route('m', none, 1).kind).toBe('route');
  });

  it('stale load is unknown, which is free: a busy worker that goes silent for 3 heartbeats takes traffic again', () => {
    const { router, report, advance } = setup({ thresholds: { active_prefill_tokens_threshold: 0 } });
    report(1, { active_prefill_tokens: 5 });
    expect(router.route('m', none, 1).kind).toBe('overloaded');
    advance(3 * HEARTBEAT);
    expect(router.route('m', none, 1).kind).toBe('overloaded');
    advance(1);
    expect(router.route('m', none, 1).kind).toBe('route');
  });

  it('a NATS worker silent for 10 heartbeats is forgotten, but never while NATS itself is down', () => {
    const { pool, report, advance, now } = setup();
    report(1);
    pool.setSourceUp('nats', false, now());
    advance(100 * HEARTBEAT);
    expect(pool.sweep(now())).toEqual([]);
    pool.setSourceUp('nats', true, now());
    advance(10 * HEARTBEAT);
    expect(pool.sweep(now())).toEqual([]);
    advance(1);
    expect(pool.sweep(now())).toEqual(['1']);
  });

  it('a worker-side RESOURCE_EXHAUSTED keeps the worker out for the lease, cleared early by its next event', () => {
    const { router, report, advance } = setup();
    report(1);
    const first = router.route('m', none, 1);
    if (first.kind !== 'route') throw new Error('expected a route');
    router.workerRefused(first.target, 'overloaded');
    expect(router.route('m', none, 1)).toMatchObject({ kind: 'overloaded', details: { worker_overloaded: 1 } });
    advance(LEASE);
    expect(router.route('m', none, 1).kind).toBe('route');
    router.workerRefused(first.target, 'overloaded');
    report(1, { overloaded: false });
    expect(router.route('m', none, 1).kind).toBe('route');
    report(1, { overloaded: true });
    expect(router.route('m', none, 1).kind).toBe('overloaded');
  });

  it("answers overloaded from a refusal lease with the worker's pushback left as the retry time, without a round trip", () => {
    const { router, report, advance } = setup();
    report(1);
    const first = router.route('m', none, 1);
    if (first.kind !== 'route') throw new Error('expected a route');
    router.workerRefused(first.target, 'overloaded', 300);
    advance(100);
    expect(router.route('m', none, 1)).toMatchObject({ kind: 'overloaded', retryAfterMs: 200 });
    advance(200);
    expect(router.route('m', none, 1)).not.toHaveProperty('retryAfterMs');
    router.workerRefused(first.target, 'overloaded');
    expect(router.route('m', none, 1)).not.toHaveProperty('retryAfterMs');
  });

  it('an unreachable worker is skipped for the lease; a NATS event does not clear it, a push update does', () => {
    const { router, report, advance } = setup();
    report(1);
    router.workerRefused({ workerId: '1', address: 'x:1', dpRank: 0 }, 'unreachable');
    expect(router.route('m', none, 1).kind).toBe('unavailable');
    report(1);
    expect(router.route('m', none, 1).kind).toBe('unavailable');
    advance(LEASE);
    expect(router.route('m', none, 1).kind).toBe('route');

    const push = setup();
    push.report(2, {}, 'push');
    push.router.workerRefused({ workerId: '2', address: 'x:1', dpRank: 0 }, 'unreachable');
    expect(push.router.route('m', none, 1).kind).toBe('unavailable');
    push.report(2, {}, 'push');
    expect(push.router.route('m', none, 1).kind).toBe('route');
  });

  it('a request never tries the same worker twice: tried workers are excluded and counted', () => {
    const { router, report } = setup();
    report(1);
    report(2);
    const tried = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const d = router.route('m', tried, 1);
      if (d.kind !== 'route') throw new Error('expected a route');
      expect(tried.has(d.target.workerId)).toBe(false);
      tried.add(d.target.workerId);
    }
    expect(router.route('m', tried, 1)).toMatchObject({ kind: 'overloaded', details: { tried: 2 } });
  });

  it('picks a free dp rank of a worker whose other rank is busy', () => {
    const { router, report } = setup({ thresholds: { active_prefill_tokens_threshold: 10 } });
    report(1, { dp_rank: 0, active_prefill_tokens: 50 });
    report(1, { dp_rank: 1, active_prefill_tokens: 0 });
    for (let i = 0; i < 3; i++) expect(router.route('m', none, 1)).toMatchObject({ kind: 'route', target: { workerId: '1', dpRank: 1 } });
  });

  it('round-robin takes every worker in turn, and skips a busy one while the others keep their order', () => {
    const rr = setup({ mode: 'round-robin', thresholds: { active_prefill_tokens_threshold: 10 } });
    for (const id of [1, 2, 3]) rr.report(id, { active_prefill_tokens: 0 });
    const picks = (count: number) =>
      Array.from({ length: count }, () => {
        const d = rr.router.route('m', none, 1);
        return d.kind === 'route' ? d.target.workerId : d.kind;
      });
    expect(picks(6)).toEqual(['1', '2', '3', '1', '2', '3']);
    rr.report(2, { active_prefill_tokens: 50 });
    expect(picks(4)).toEqual(['1', '3', '1', '3']);
    // Free again: back in the rotation, which goes on from where it was.
    rr.report(2, { active_prefill_tokens: 0 });
    expect(picks(6)).toEqual(['2', '3', '1', '2', '3', '1']);
  });

  it('least-loaded follows in-flight calls, kv follows KV usage', () => {
    const ll = setup({ mode: 'least-loaded' });
    ll.report(1);
    ll.report(2);
    const first = ll.router.route('m', none, 1);
    if (first.kind !== 'route') throw new Error('expected a route');
    const inflight = ll.router.begin(first.target, 1);
    for (let i = 0; i < 3; i++) expect(ll.router.route('m', none, 1)).toMatchObject({ target: { workerId: first.target.workerId === '1' ? '2' : '1' } });
    inflight.end();

    const kv = setup({ mode: 'kv' });
    kv.report(1, { kv_used_blocks: 50 });
    kv.report(2, { kv_used_blocks: 10 });
    for (let i = 0; i < 3; i++) expect(kv.router.route('m', none, 16)).toMatchObject({ target: { workerId: '2' } });
    // This frontend's own in-flight blocks count too: 48 prompt blocks in flight at worker 2 tip it over.
    const big = kv.router.begin({ workerId: '2', address: '', dpRank: 0 }, 48 * 16);
    expect(kv.router.route('m', none, 16)).toMatchObject({ target: { workerId: '1' } });
    big.end();
  });

  it('a configured check that cannot fire is logged once per worker and listed in the diagnostics', () => {
    const { router, report, logger, store } = setup({ thresholds: { active_prefill_tokens_threshold_frac: 0.5 } });
    report(1, { active_prefill_tokens: 100 });
    for (let i = 0; i < 5; i++) router.route('m', none, 1);
    expect(logger.find('busy check cannot fire on this worker')).toHaveLength(1);
    expect(router.inactiveChecks('m', store.get('m'))).toEqual([
      { check: 'active_prefill_tokens_threshold_frac', reason: 'max_num_batched_tokens unknown', workers: ['1'] },
    ]);
    report(1, { active_prefill_tokens: 100, max_num_batched_tokens: 100 });
    expect(router.inactiveChecks('m', store.get('m'))).toEqual([]);
    expect(router.route('m', none, 1).kind).toBe('overloaded');
  });
});

describe('routing invariants under random event sequences', () => {
  it('never routes to a busy, leased, draining or tried worker; in-flight counts return to zero', () => {
    const random = mulberry32(42);
    const int = (n: number): number => Math.floor(random() * n);
    let routed = 0;
    for (let run = 0; run < 200; run++) {
      const modes: RouterMode[] = ['round-robin', 'random', 'least-loaded', 'kv'];
      const t = setup({
        mode: modes[run % 4]!,
        thresholds: { active_prefill_tokens_threshold: 20, active_decode_blocks_threshold: 0.5 },
        trackOutputBlocks: run % 2 === 0,
      });
      const open: { end(): void; outputTokens(n: number): void }[] = [];
      for (let step = 0; step < 60; step++) {
        const action = int(7);
        const id = 1 + int(3);
        if (action === 0)
          t.report(id, { dp_rank: int(2), active_prefill_tokens: int(40), active_decode_blocks: int(64), draining: int(10) === 0, overloaded: int(8) === 0 });
        else if (action === 1) t.advance(int(4 * HEARTBEAT));
        else if (action === 2) t.router.workerRefused({ workerId: String(id), address: '', dpRank: 0 }, int(2) ? 'overloaded' : 'unreachable');
        else if (action === 3 && open.length) open.splice(int(open.length), 1)[0]!.end();
        else if (action === 4 && open.length) open[int(open.length)]!.outputTokens(int(40));
        else {
          const tried = new Set<string>(int(2) ? [String(id)] : []);
          const d = t.router.route('m', tried, 1 + int(64));
          if (d.kind !== 'route') continue;
          routed++;
          const w = t.pool.get(d.target.workerId)!;
          const target: RouteTarget = d.target;
          expect(tried.has(target.workerId)).toBe(false);
          expect(w.draining).toBe(false);
          expect(w.overloadedUntil <= t.now()).toBe(true);
          expect(w.unreachableUntil <= t.now()).toBe(true);
          const fresh = [...w.ranks.values()].map((r) => t.pool.freshReport(w, r, t.now()));
          expect(judgeWorker(fresh, t.store.get('m')).busy).toBe(false);
          open.push(t.router.begin(target, 1 + int(64)));
        }
      }
      for (const f of open) {
        f.end();
        f.end();
      }
      for (const w of t.pool.all()) {
        expect(w.inFlight).toBe(0);
        for (const r of w.ranks.values()) expect([r.inFlight, r.inFlightBlocks]).toEqual([0, 0]);
      }
    }
    // The sequences must exercise routing, not only refusals.
    expect(routed).toBeGreaterThan(500);
  });
});
