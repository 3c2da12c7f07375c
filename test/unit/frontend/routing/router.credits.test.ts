// Credits (admit_now) in routing: a worker with none left gets no call until its next event, and
// a refusal holds a credit-giving worker out only until that event or its pushback.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { WorkerRouter } from '../../../../src/frontend/routing/router.js';
import { ThresholdStore } from '../../../../src/frontend/routing/thresholds.js';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';

const HEARTBEAT = 100;
const LEASE = 1000;

function setup() {
  let now = 10_000;
  let sequence = 0;
  const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: LEASE, maxWorkers: 100 });
  const router = new WorkerRouter(
    { mode: 'round-robin', kvBlockSize: 16, trackOutputBlocks: false, maxPredictedTtftMs: null },
    { pool, thresholds: new ThresholdStore(THRESHOLDS_OFF), now: () => now, random: mulberry32(1), logger: recordingLogger() },
  );
  const report = (id: number, fields: Record<string, unknown> = {}) =>
    pool.apply(
      parseRankReport({
        worker_id: id,
        model: 'm',
        grpc_address: `127.0.0.1:${5000 + id}`,
        heartbeat_ms: HEARTBEAT,
        engine_request_limit: 4,
        request_queue_limit: 0,
        sequence: ++sequence,
        timestamp_ms: now,
        ...fields,
      }),
      now,
      'nats',
    );
  /** Routes and begins `n` requests; the worker ids they went to ('-' for a 529). */
  const send = (n: number, priority?: number): string[] =>
    Array.from({ length: n }, () => {
      const d = router.route('m', new Set(), 10, priority);
      if (d.kind !== 'route') return '-';
      router.begin(d.target, 10);
      return d.target.workerId;
    });
  return { pool, router, report, send, advance: (ms: number) => (now += ms) };
}

describe('routing by credits', () => {
  it('sends a worker no more calls than its event admitted, until its next event', () => {
    const { report, send, router } = setup();
    report(1, { admit_now: 2 });
    report(2, { admit_now: 1 });
    expect(send(3).sort()).toEqual(['1', '1', '2']);
    const refused = router.route('m', new Set(), 10);
    expect(refused).toMatchObject({ kind: 'overloaded', details: { workers: 2, no_credit: 2, busy: 0, worker_overloaded: 0 } });
    report(2, { admit_now: 1, engine_request: 1 });
    expect(send(2)).toEqual(['2', '-']);
  });

  it('routes a worker that gives no credit (a Dynamo worker, admission off) as before', () => {
    const { report, send } = setup();
    report(1, { engine_request_limit: null, admit_now: 0 });
    report(2, {});
    expect(send(6)).not.toContain('-');
  });

  it('a stale report holds no credit back: a silent worker is routed as free, as its load is', () => {
    const { report, send, advance } = setup();
    report(1, { admit_now: 0, overloaded: true });
    expect(send(1)).toEqual(['-']);
    advance(3 * HEARTBEAT + 1);
    expect(send(1)).toEqual(['1']);
  });

  it('an urgent request passes a worker whose overload refuses only less urgent calls', () => {
    const { report, send } = setup();
    report(1, { admit_now: 0, overloaded: true, overloaded_priority: 5 });
    expect(send(1, 5)).toEqual(['-']);
    expect(send(1, 0)).toEqual(['1']);
  });

  it("an overloaded event sets no lease on a worker that gives credit: its next event's credit is used at once", () => {
    const { report, send } = setup();
    report(1, { admit_now: 0, overloaded: true });
    expect(send(1)).toEqual(['-']);
    report(1, { admit_now: 1, overloaded: true });
    expect(send(1)).toEqual(['1']);
  });

  it('a refusal holds a credit-giving worker out until its next event, not for the lease', () => {
    const { report, send, router, advance } = setup();
    report(1, { admit_now: 3 });
    router.workerRefused({ workerId: '1', address: '127.0.0.1:5001', dpRank: 0 }, 'overloaded');
    expect(send(1)).toEqual(['-']);
    advance(20);
    report(1, { admit_now: 1, engine_request: 3 });
    expect(send(1)).toEqual(['1']);
  });

  it('... or for its pushback, when that comes first', () => {
    const { report, send, router, advance } = setup();
    report(1, { admit_now: 3 });
    router.workerRefused({ workerId: '1', address: '127.0.0.1:5001', dpRank: 0 }, 'overloaded', 50);
    advance(49);
    expect(send(1)).toEqual(['-']);
    advance(2);
    expect(send(1)).toEqual(['1']);
  });

  it('without credits a refusal still leases the worker for the whole lease', () => {
    const { report, send, router, advance } = setup();
    report(1, { engine_request_limit: null });
    router.workerRefused({ workerId: '1', address: '127.0.0.1:5001', dpRank: 0 }, 'overloaded', 50);
    advance(60);
    expect(send(1)).toEqual(['-']);
    advance(LEASE);
    expect(send(1)).toEqual(['1']);
  });

  it('ignores an older event (lower sequence, older clock): its credit is not applied', () => {
    const { report, send } = setup();
    report(1, { admit_now: 0, sequence: 100, timestamp_ms: 20_000 });
    report(1, { admit_now: 4, sequence: 99, timestamp_ms: 19_990 });
    expect(send(1)).toEqual(['-']);
  });
});
