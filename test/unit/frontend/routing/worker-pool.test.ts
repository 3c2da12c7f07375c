// The workers the frontend knows: applying reports, staleness and forgetting in heartbeats, leases, push connectivity.
import { describe, expect, it } from 'vitest';
import { parseRankReport, type RankReport } from '../../../../src/frontend/routing/load-report.js';
import { FORGET_AFTER_HEARTBEATS, STALE_AFTER_HEARTBEATS, WorkerPool, leasedFor } from '../../../../src/frontend/routing/worker-pool.js';

const HEARTBEAT = 100;
const LEASE = 1000;

const pool = (maxWorkers = 10) => new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: LEASE, maxWorkers });
const report = (fields: Record<string, unknown> = {}): RankReport => parseRankReport({ worker_id: 1, model: 'm', grpc_address: 'h:1', ...fields });

describe('WorkerPool.apply', () => {
  it('adds a worker on its first report with its model, address and the default heartbeat', () => {
    const workers = pool();
    const worker = workers.apply(report(), 5, 'nats')!;
    expect(worker).toMatchObject({
      workerId: '1',
      source: 'nats',
      model: 'm',
      address: 'h:1',
      heartbeatMs: HEARTBEAT,
      lastSeen: 5,
      draining: false,
      connected: true,
    });
    expect(workers.size).toBe(1);
    expect(workers.get('1')).toBe(worker);
    expect([...workers.all()]).toEqual([worker]);
  });

  it('keeps one entry per worker with one state per rank, updated in place', () => {
    const workers = pool();
    workers.apply(report({ dp_rank: 0, kv_used_blocks: 1 }), 0, 'nats');
    workers.apply(report({ dp_rank: 1, kv_used_blocks: 2 }), 1, 'nats');
    const worker = workers.apply(report({ dp_rank: 0, kv_used_blocks: 3 }), 2, 'nats')!;
    expect(workers.size).toBe(1);
    expect([...worker.ranks.keys()]).toEqual([0, 1]);
    expect(worker.ranks.get(0)).toMatchObject({ receivedAt: 2, inFlight: 0 });
    expect(worker.ranks.get(0)!.report.kvUsedBlocks).toBe(3);
  });

  it('keeps the model, address and heartbeat it knew when a later report leaves them out', () => {
    const workers = pool();
    workers.apply(report({ heartbeat_ms: 500 }), 0, 'nats');
    const worker = workers.apply(parseRankReport({ worker_id: 1 }), 1, 'nats')!;
    expect(worker).toMatchObject({ model: 'm', address: 'h:1', heartbeatMs: 500 });
  });

  it('prefers the address it was given (a --worker address) over the advertised one', () => {
    expect(pool().apply(report(), 0, 'push', 'reached:2')!.address).toBe('reached:2');
  });

  it("keeps a push worker's address when its NATS events advertise another", () => {
    const workers = pool();
    workers.apply(report(), 0, 'push', 'reached:2');
    expect(workers.apply(report({ grpc_address: 'advertised:3' }), 1, 'nats')!.address).toBe('reached:2');
  });

  it('refuses a new worker beyond maxWorkers, but still updates the known ones', () => {
    const workers = pool(1);
    workers.apply(report(), 0, 'nats');
    expect(workers.apply(report({ worker_id: 2 }), 1, 'nats')).toBeUndefined();
    expect(workers.size).toBe(1);
    expect(workers.apply(report({ draining: true }), 2, 'nats')!.draining).toBe(true);
  });

  it('sets an overloaded lease from the flag, and clears it with the next report without it', () => {
    const workers = pool();
    expect(workers.apply(report({ overloaded: true }), 10, 'nats')!.overloadedUntil).toBe(10 + LEASE);
    expect(workers.apply(report(), 20, 'nats')!.overloadedUntil).toBe(0);
  });

  it('leases a worker only for whom it refuses: less urgent requests of the tenants named', () => {
    const workers = pool();
    const worker = workers.apply(report({ overloaded: true, overloaded_priority: 5, overloaded_tenants: ['noisy'] }), 0, 'nats')!;
    expect(leasedFor(worker, 1, { priority: 5, tenant: 'noisy' })).toBe(true);
    expect(leasedFor(worker, 1, { priority: 9, tenant: 'noisy' })).toBe(true);
    expect(leasedFor(worker, 1, { priority: 0, tenant: 'noisy' })).toBe(false); // more urgent: it would displace a queued call
    expect(leasedFor(worker, 1, { priority: 5, tenant: 'polite' })).toBe(false); // it would push out one of noisy's
    expect(leasedFor(worker, 1, undefined)).toBe(true); // a request of unknown class: the cautious reading
    expect(leasedFor(worker, LEASE + 1, { priority: 9, tenant: 'noisy' })).toBe(false); // the lease is over
    // The frontend's own refusals widen the lease in force with the class refused.
    workers.markOverloaded(worker.workerId, 2, undefined, { priority: 1, tenant: undefined });
    expect(leasedFor(worker, 3, { priority: 1 })).toBe(true);
    expect(leasedFor(worker, 3, { priority: 1, tenant: 'polite' })).toBe(false);
    expect(leasedFor(worker, 3, { priority: 0 })).toBe(false);
    // A refusal of unknown class leases the worker for everyone.
    workers.markOverloaded(worker.workerId, 4);
    expect(leasedFor(worker, 5, { priority: -100, tenant: 'polite' })).toBe(true);
  });

  it('drops a rank silent longer than the forget window while the worker reports another', () => {
    const workers = pool();
    workers.apply(report({ dp_rank: 1 }), 0, 'nats');
    const limit = FORGET_AFTER_HEARTBEATS * HEARTBEAT;
    expect([...workers.apply(report({ dp_rank: 0 }), limit, 'nats')!.ranks.keys()].sort()).toEqual([0, 1]);
    expect([...workers.apply(report({ dp_rank: 0 }), limit + 1, 'nats')!.ranks.keys()]).toEqual([0]);
  });
});

/** The per-worker rank cap the docs give (MAX_DP_RANKS, the sidecar's --data-parallel-size bound). */
const CAP = 1024;

/** Counts the reads of `state[key]` from now on (reads and writes keep working). */
function countReads(state: object, key: string, onRead: () => void): void {
  let value: unknown = (state as Record<string, unknown>)[key];
  Object.defineProperty(state, key, {
    get: () => {
      onRead();
      return value;
    },
    set: (next: unknown) => void (value = next),
    enumerable: true,
    configurable: true,
  });
}

describe('WorkerPool ranks per worker', () => {
  const limit = FORGET_AFTER_HEARTBEATS * HEARTBEAT;

  it('keeps at most 1,024: a report of one more rank is refused, counted on the worker and changes nothing, while its ranks still update', () => {
    const workers = pool();
    for (let rank = 0; rank < CAP; rank++) workers.apply(report({ dp_rank: rank }), 0, 'nats');
    expect(workers.apply(report({ dp_rank: CAP, draining: true }), 1, 'nats')).toBeUndefined();
    expect(workers.apply(report({ dp_rank: 65535 }), 1, 'nats')).toBeUndefined();
    const worker = workers.get('1')!;
    expect(worker.ranks.size).toBe(CAP);
    expect(worker.ranks.has(CAP)).toBe(false);
    expect(worker).toMatchObject({ draining: false, lastSeen: 0, ranksRefused: 2 });
    expect(workers.apply(report({ dp_rank: 0, draining: true }), 2, 'nats')!.draining).toBe(true);
  });

  it('refuses all but the first 1,024 of 20,000 ranks', () => {
    const workers = pool();
    let refused = 0;
    for (let rank = 0; rank < 20_000; rank++) if (workers.apply(report({ dp_rank: rank }), 0, 'push', 'p:1') === undefined) refused++;
    expect(refused).toBe(20_000 - CAP);
    expect(Math.max(...workers.get('1')!.ranks.keys())).toBe(CAP - 1);
  });

  it('has room for a new rank again once its silent ranks have expired', () => {
    const workers = pool();
    for (let rank = 0; rank < CAP; rank++) workers.apply(report({ dp_rank: rank }), 0, 'nats');
    expect(workers.apply(report({ dp_rank: CAP }), limit, 'nats')).toBeUndefined();
    expect([...workers.apply(report({ dp_rank: CAP }), limit + 1, 'nats')!.ranks.keys()]).toEqual([CAP]);
  });

  it('updates 1,024 ranks and then expires all but one looking at each rank a bounded number of times, not once per rank per report', () => {
    const workers = pool();
    for (let rank = 0; rank < CAP; rank++) workers.apply(report({ dp_rank: rank }), 0, 'nats');
    const worker = workers.get('1')!;
    let reads = 0;
    for (const state of worker.ranks.values()) countReads(state, 'receivedAt', () => reads++);
    // A full update, then rank 0 alone past the forget window: the 1,023 others are dropped.
    for (let rank = 0; rank < CAP; rank++) workers.apply(report({ dp_rank: rank }), 1, 'nats');
    workers.apply(report({ dp_rank: 0 }), limit + 2, 'nats');
    expect([...worker.ranks.keys()]).toEqual([0]);
    // A rescan of every rank on each report reads 1,024 x 1,024 times (over a million).
    expect(reads).toBeLessThanOrEqual(4 * CAP);
  });
});

describe('WorkerPool.freshReport', () => {
  it('is the report until more than 3 heartbeats old, then unknown', () => {
    const workers = pool();
    const worker = workers.apply(report(), 0, 'nats')!;
    const rank = worker.ranks.get(0)!;
    expect(workers.freshReport(worker, rank, STALE_AFTER_HEARTBEATS * HEARTBEAT)).toBe(rank.report);
    expect(workers.freshReport(worker, rank, STALE_AFTER_HEARTBEATS * HEARTBEAT + 1)).toBeUndefined();
  });

  it("counts in the worker's own heartbeat when it reports one", () => {
    const workers = pool();
    const worker = workers.apply(report({ heartbeat_ms: 1000 }), 0, 'nats')!;
    expect(workers.freshReport(worker, worker.ranks.get(0)!, 3000)).toBeDefined();
  });

  it('is unknown for every NATS worker while NATS is down, and fresh again once it is back', () => {
    const workers = pool();
    const natsWorker = workers.apply(report(), 0, 'nats')!;
    const pushWorker = workers.apply(report({ worker_id: 2 }), 0, 'push', 'p:1')!;
    workers.setSourceUp('nats', false, 0);
    expect(workers.freshReport(natsWorker, natsWorker.ranks.get(0)!, 1)).toBeUndefined();
    expect(workers.freshReport(pushWorker, pushWorker.ranks.get(0)!, 1)).toBeDefined();
    workers.setSourceUp('nats', true, 1);
    expect(workers.freshReport(natsWorker, natsWorker.ranks.get(0)!, 1)).toBeDefined();
  });
});

describe('WorkerPool.routable', () => {
  it('needs an address and a model', () => {
    const workers = pool();
    expect(workers.routable(workers.apply(parseRankReport({ worker_id: 1, model: 'm' }), 0, 'nats')!, 0)).toBe(false);
    expect(workers.routable(workers.apply(parseRankReport({ worker_id: 2, grpc_address: 'h:1' }), 0, 'nats')!, 0)).toBe(false);
    expect(workers.routable(workers.apply(report({ worker_id: 3 }), 0, 'nats')!, 0)).toBe(true);
  });

  it('is false while draining', () => {
    const workers = pool();
    expect(workers.routable(workers.apply(report({ draining: true }), 0, 'nats')!, 0)).toBe(false);
  });

  it('is false for the length of an unreachable lease, which a push update ends early but a NATS event does not', () => {
    const workers = pool();
    const worker = workers.apply(report(), 0, 'nats')!;
    workers.markUnreachable('1', 100);
    expect(workers.routable(worker, 100 + LEASE - 1)).toBe(false);
    expect(workers.routable(worker, 100 + LEASE)).toBe(true);
    workers.markUnreachable('1', 200);
    workers.apply(report(), 201, 'nats');
    expect(workers.routable(worker, 201)).toBe(false);

    const pushed = workers.apply(report({ worker_id: 2 }), 0, 'push', 'p:1')!;
    workers.markUnreachable('2', 300);
    workers.apply(report({ worker_id: 2 }), 301, 'push', 'p:1');
    expect(workers.routable(pushed, 301)).toBe(true);
  });

  it('is false for a push worker whose stream is down until its next update', () => {
    const workers = pool();
    const worker = workers.apply(report(), 0, 'push', 'p:1')!;
    expect(workers.connectedPushWorkers()).toBe(1);
    workers.disconnected('1');
    expect(workers.routable(worker, 0)).toBe(false);
    expect(workers.connectedPushWorkers()).toBe(0);
    workers.apply(report(), 1, 'push', 'p:1');
    expect(workers.routable(worker, 1)).toBe(true);
  });
});

describe('WorkerPool leases and removal', () => {
  it('marks overloaded for one lease from now; marks on unknown workers are ignored', () => {
    const workers = pool();
    const worker = workers.apply(report(), 0, 'nats')!;
    workers.markOverloaded('1', 50);
    expect(worker.overloadedUntil).toBe(50 + LEASE);
    workers.markOverloaded('9', 50);
    workers.markUnreachable('9', 50);
    workers.disconnected('9');
    expect(workers.size).toBe(1);
  });

  it('counts only push workers as connected push workers', () => {
    const workers = pool();
    workers.apply(report(), 0, 'nats');
    workers.apply(report({ worker_id: 2 }), 0, 'push', 'p:1');
    expect(workers.connectedPushWorkers()).toBe(1);
  });

  it('forgets a worker at once on forget()', () => {
    const workers = pool();
    workers.apply(report(), 0, 'push', 'p:1');
    workers.forget('1');
    expect(workers.get('1')).toBeUndefined();
  });
});

describe('WorkerPool.sweep', () => {
  const limit = FORGET_AFTER_HEARTBEATS * HEARTBEAT;

  it('forgets NATS workers silent longer than 10 heartbeats and returns their ids', () => {
    const workers = pool();
    workers.apply(report(), 0, 'nats');
    workers.apply(report({ worker_id: 2 }), 50, 'nats');
    expect(workers.sweep(limit)).toEqual([]);
    expect(workers.sweep(limit + 1)).toEqual(['1']);
    expect(workers.get('1')).toBeUndefined();
    expect(workers.get('2')).toBeDefined();
  });

  it('never forgets a push worker, however long it is silent', () => {
    const workers = pool();
    workers.apply(report(), 0, 'push', 'p:1');
    expect(workers.sweep(100 * limit)).toEqual([]);
  });

  it('forgets nothing while NATS is down, and restarts the silence window when it comes back', () => {
    const workers = pool();
    workers.apply(report(), 0, 'nats');
    workers.setSourceUp('nats', false, 10);
    expect(workers.sweep(5 * limit)).toEqual([]);
    workers.setSourceUp('nats', true, 5 * limit);
    expect(workers.sweep(6 * limit)).toEqual([]);
    expect(workers.sweep(6 * limit + 1)).toEqual(['1']);
  });

  it('does not move the silence window when a source that was up is reported up again', () => {
    const workers = pool();
    workers.apply(report(), 0, 'nats');
    workers.setSourceUp('nats', true, limit);
    expect(workers.sweep(limit + 1)).toEqual(['1']);
  });
});
