/**
 * Load events that lie or go out of date: a rank a worker no longer reports (its dp size
 * shrank across a restart under the same worker_id, or one stray event said dp_rank 65535)
 * must not keep the worker free forever, nor draw its traffic.
 */
import { describe, expect, it } from 'vitest';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { WorkerRouter } from '../../../../src/frontend/routing/router.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';
import { FORGET_AFTER_HEARTBEATS, WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const HEARTBEAT = 100;

function setup() {
  let now = 10_000;
  const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: 1000, maxWorkers: 100 });
  const thresholds = { ...THRESHOLDS_OFF, active_prefill_tokens_threshold: 10 };
  const router = new WorkerRouter(
    { mode: 'least-loaded', kvBlockSize: 16, trackOutputBlocks: false, maxPredictedTtftMs: null },
    { pool, thresholds: { get: () => thresholds, priorityScales: () => [] }, now: () => now, random: () => 0, logger: recordingLogger() },
  );
  const report = (fields: Record<string, unknown>) =>
    pool.apply(parseRankReport({ worker_id: 7, model: 'm', grpc_address: '127.0.0.1:5007', heartbeat_ms: HEARTBEAT, ...fields }), now, 'nats');
  return { pool, router, report, advance: (ms: number) => (now += ms) };
}

const none = new Set<string>();

describe('a rank the worker stopped reporting', () => {
  it('is dropped once silent as long as a forgotten worker, so the ranks still reported decide busy', () => {
    const { router, report, advance } = setup();
    report({ dp_rank: 0, active_prefill_tokens: 50 });
    report({ dp_rank: 65535, active_prefill_tokens: 0 });
    // Only rank 0 keeps reporting (busy), every heartbeat, for longer than the forget window.
    for (let beat = 0; beat <= FORGET_AFTER_HEARTBEATS + 1; beat++) {
      advance(HEARTBEAT);
      report({ dp_rank: 0, active_prefill_tokens: 50 });
    }
    expect(router.route('m', none, 1).kind).toBe('overloaded');
  });

  it('is never the rank asked for once it is out of date, while a reported free rank exists', () => {
    const { router, report, advance } = setup();
    report({ dp_rank: 65535, active_prefill_tokens: 0 });
    for (let beat = 0; beat <= FORGET_AFTER_HEARTBEATS + 1; beat++) {
      advance(HEARTBEAT);
      report({ dp_rank: 0, active_prefill_tokens: 5, active_decode_blocks: 3 });
    }
    const decision = router.route('m', none, 1);
    expect(decision.kind === 'route' && decision.target.dpRank).toBe(0);
  });
});

describe('a heartbeat_ms no sidecar can have', () => {
  it('is refused like any malformed field, so one event cannot make its load fresh (and its worker remembered) for ever', () => {
    for (const heartbeat_ms of [1e15, 3_600_001, 5]) {
      expect(() => parseRankReport({ worker_id: 1, heartbeat_ms }), String(heartbeat_ms)).toThrow(/heartbeat_ms/u);
    }
    expect(parseRankReport({ worker_id: 1, heartbeat_ms: 3_600_000 }).heartbeatMs).toBe(3_600_000);
    expect(parseRankReport({ worker_id: 1, heartbeat_ms: 0 }).heartbeatMs).toBeUndefined();
  });
});

describe('a worker both pushed (--worker) and on NATS', () => {
  it('keeps the --worker address, where this frontend reached it, whatever address its NATS events advertise', () => {
    const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: 1000, maxWorkers: 100 });
    pool.apply(parseRankReport({ worker_id: 3, model: 'm', grpc_address: '0.0.0.0:50050' }), 1, 'push', '10.0.0.3:50050');
    pool.apply(parseRankReport({ worker_id: 3, model: 'm', grpc_address: 'sidecar-3.internal:50050' }), 2, 'nats');
    expect(pool.get('3')!.address).toBe('10.0.0.3:50050');
  });
});

describe('a predicted_ttft_ms no sidecar can mean', () => {
  it('reads as unknown and the event still counts: its busy counters apply', () => {
    const { router, report } = setup();
    for (const predicted_ttft_ms of [-1, 1e300, '-3', 'soon', { ms: 1 }, 2 ** 32]) {
      // Busy by its prefill tokens: a bad estimate must not hide that (the event is applied, not refused).
      report({ predicted_ttft_ms, active_prefill_tokens: 50 });
      expect(router.route('m', none, 1).kind, JSON.stringify(predicted_ttft_ms)).toBe('overloaded');
      report({ predicted_ttft_ms, active_prefill_tokens: 0 });
      expect(router.route('m', none, 1).kind, JSON.stringify(predicted_ttft_ms)).toBe('route');
    }
  });
});

describe('credits from a worker that lies', () => {
  const admitNow = (fields: Record<string, unknown>) => parseRankReport({ worker_id: 7, ...fields }).admitNow;

  it.each([
    { name: 'negative: no credit', fields: { engine_request_limit: 4, admit_now: -3 }, expected: 0 },
    { name: 'far past N + Q: N + Q', fields: { engine_request_limit: 4, request_queue_limit: 2, admit_now: 1e12 }, expected: 6 },
    { name: 'Infinity: N + Q', fields: { engine_request_limit: 4, request_queue_limit: 2, admit_now: Infinity }, expected: 6 },
    { name: 'a bad queue limit counts as none: N', fields: { engine_request_limit: 4, request_queue_limit: -1, admit_now: 9 }, expected: 4 },
    { name: 'fractional: floored', fields: { engine_request_limit: 4, admit_now: 2.7 }, expected: 2 },
    { name: 'a decimal string (uint64 on the push stream)', fields: { engine_request_limit: '4', admit_now: '3' }, expected: 3 },
    { name: 'NaN: unknown', fields: { engine_request_limit: 4, admit_now: NaN }, expected: undefined },
    { name: 'not a number: unknown', fields: { engine_request_limit: 4, admit_now: 'lots' }, expected: undefined },
    { name: 'no N stated: not trusted', fields: { admit_now: 3 }, expected: undefined },
    { name: 'absent: unknown', fields: { engine_request_limit: 4 }, expected: undefined },
  ])('$name', ({ fields, expected }) => {
    expect(admitNow(fields)).toBe(expected);
  });

  it('a worker claiming a huge credit still gets no more calls than its own N + Q before its next event', () => {
    const { router, report } = setup();
    report({ engine_request_limit: 3, request_queue_limit: 1, admit_now: 1e9 });
    const routed = Array.from({ length: 10 }, () => {
      const d = router.route('m', none, 1);
      if (d.kind === 'route') router.begin(d.target, 1);
      return d.kind;
    });
    expect(routed.filter((k) => k === 'route')).toHaveLength(4);
  });
});
