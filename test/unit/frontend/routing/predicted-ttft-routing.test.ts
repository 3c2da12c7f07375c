/**
 * --router-mode predicted-ttft and the fourth busy check (--max-predicted-ttft-ms): which free
 * worker the router picks from the sidecars' predicted_ttft_ms, how it corrects for the calls it
 * sent since a worker's last report, how unknown predictions are treated, and when the check
 * makes a worker busy.
 */
import { describe, expect, it } from 'vitest';
import type { Thresholds } from '../../../../src/frontend/routing/contracts.js';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { WorkerRouter, type RouterMode } from '../../../../src/frontend/routing/router.js';
import { STALE_AFTER_HEARTBEATS, WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';

const HEARTBEAT = 100;

function setup(options: { mode?: RouterMode; maxPredictedTtftMs?: number | null; thresholds?: Partial<Thresholds> } = {}) {
  let now = 10_000;
  const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: 1000, maxWorkers: 100 });
  const thresholds = { ...THRESHOLDS_OFF, ...options.thresholds };
  const router = new WorkerRouter(
    { mode: options.mode ?? 'predicted-ttft', kvBlockSize: 16, trackOutputBlocks: false, maxPredictedTtftMs: options.maxPredictedTtftMs ?? null },
    { pool, thresholds: { get: () => thresholds, priorityScales: () => [] }, now: () => now, random: () => 0, logger: recordingLogger() },
  );
  const report = (id: number, fields: Record<string, unknown> = {}) =>
    pool.apply(parseRankReport({ worker_id: id, model: 'm', grpc_address: `127.0.0.1:${5000 + id}`, heartbeat_ms: HEARTBEAT, ...fields }), now, 'nats');
  /** Routes one attempt and counts it in flight (as the attempt loop does), returning the worker id. */
  const send = (): string => {
    const decision = router.route('m', new Set(), 1);
    if (decision.kind !== 'route') throw new Error(`expected a route, got ${decision.kind}`);
    router.begin(decision.target, 1);
    return decision.target.workerId;
  };
  const sendMany = (n: number): Map<string, number> => {
    const counts = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const id = send();
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    return counts;
  };
  return { pool, router, report, send, sendMany, advance: (ms: number) => (now += ms) };
}

/** Per worker: its report's fields (undefined: no report at all). */
type Workers = Record<number, Record<string, unknown> | undefined>;

describe('predicted-ttft routing: one decision right after the reports', () => {
  it.each<[string, Workers, string]>([
    ['the lowest prediction wins', { 1: { predicted_ttft_ms: 300 }, 2: { predicted_ttft_ms: 40 }, 3: { predicted_ttft_ms: 90 } }, '2'],
    ['a prediction of 0 (admitted at once) wins', { 1: { predicted_ttft_ms: 5 }, 2: { predicted_ttft_ms: 0 } }, '2'],
    [
      'the prediction decides, not the reported calls (least-loaded would pick 1)',
      { 1: { predicted_ttft_ms: 500, engine_request: 0 }, 2: { predicted_ttft_ms: 50, engine_request: 9 } },
      '2',
    ],
    [
      'no prediction anywhere (older sidecars, Dynamo workers): least-loaded',
      { 1: { engine_request: 5, request_queue: 2 }, 2: { engine_request: 1 }, 3: { engine_request: 4 } },
      '2',
    ],
    ['a busy worker is never picked, however fast', { 1: { predicted_ttft_ms: 5, active_prefill_tokens: 99 }, 2: { predicted_ttft_ms: 400 } }, '2'],
  ])('%s', (_, workers, expected) => {
    const { report, send } = setup({ thresholds: { active_prefill_tokens_threshold: 10 } });
    for (const [id, fields] of Object.entries(workers)) report(Number(id), fields);
    expect(send()).toBe(expected);
  });

  it('takes the lowest prediction over a worker’s ranks', () => {
    const { report, send } = setup();
    report(1, { dp_rank: 0, predicted_ttft_ms: 400 });
    report(1, { dp_rank: 1, predicted_ttft_ms: 20 });
    report(2, { predicted_ttft_ms: 100 });
    expect(send()).toBe('1');
  });
});

describe('predicted-ttft routing: calls sent since the last report', () => {
  it.each<[string, number, number, number, number]>([
    // predictions of workers 1 and 2, calls sent, calls to worker 1. Score max(P, 1) * (1 + sent
    // since report): each burst ends where the split does not depend on how ties rotate.
    ['equal predictions share a burst evenly', 100, 100, 10, 5],
    ['a worker predicted 3x as fast takes 3x as many of a burst', 30, 90, 8, 6],
    ['a 10x faster worker takes 10 of 11', 10, 100, 11, 10],
    ['0 ms is floored to 1 ms, so it still spreads', 0, 2, 6, 4],
  ])('%s', (_, p1, p2, burst, toFirst) => {
    const { report, sendMany } = setup();
    report(1, { predicted_ttft_ms: p1 });
    report(2, { predicted_ttft_ms: p2 });
    const counts = sendMany(burst);
    expect(counts.get('1') ?? 0).toBe(toFirst);
    expect(counts.get('2') ?? 0).toBe(burst - toFirst);
  });

  it('a new report restarts the count: with requests slower than reports, every call goes to the fastest', () => {
    const { report, send } = setup();
    for (let i = 0; i < 20; i++) {
      report(1, { predicted_ttft_ms: 50 });
      report(2, { predicted_ttft_ms: 60 });
      expect(send()).toBe('1');
    }
  });

  it('the report that follows a burst decides again from its own prediction', () => {
    const { report, sendMany, send } = setup();
    report(1, { predicted_ttft_ms: 10 });
    report(2, { predicted_ttft_ms: 100 });
    expect(sendMany(9).get('2')).toBeUndefined();
    // Worker 1's next event has seen the burst: now it predicts worse than 2.
    report(1, { predicted_ttft_ms: 150 });
    expect(send()).toBe('2');
  });
});

describe('predicted-ttft routing: unknown predictions', () => {
  it('a worker with no prediction yet counts as the best known one, so it gets a share of the traffic', () => {
    const { report, sendMany } = setup();
    report(1, { predicted_ttft_ms: 20 });
    report(2, { predicted_ttft_ms: 500 });
    report(3, { predicted_ttft_ms: null });
    const counts = sendMany(10);
    expect(counts.get('1')).toBe(5);
    expect(counts.get('3')).toBe(5);
    expect(counts.get('2')).toBeUndefined();
  });

  it('a stale prediction is unknown, like the rest of the load', () => {
    const { report, send, advance } = setup();
    report(1, { predicted_ttft_ms: 10 });
    report(2, { predicted_ttft_ms: 40 });
    advance(STALE_AFTER_HEARTBEATS * HEARTBEAT + 1);
    // Worker 1 is silent; 2 reports again, now slower than 1 was.
    report(2, { predicted_ttft_ms: 400 });
    const first = send();
    const second = send();
    expect([first, second].sort()).toEqual(['1', '2']);
  });

  it('ties keep the rotation', () => {
    const { report, send } = setup();
    for (const id of [1, 2, 3]) report(id, { predicted_ttft_ms: 70 });
    const picks = [send(), send(), send()];
    expect(new Set(picks).size).toBe(3);
  });
});

describe('--max-predicted-ttft-ms, the fourth busy check', () => {
  /** [worker id, fields] in order: a worker may report several ranks. */
  type Reports = [number, Record<string, unknown>][];
  it.each<[string, number | null, Reports, string]>([
    // check, reports, expected decision: a worker id, or 'overloaded'
    ['off (null): a huge prediction is not busy', null, [[1, { predicted_ttft_ms: 3_000_000 }]], '1'],
    [
      'on: every worker over the limit, so 529',
      200,
      [
        [1, { predicted_ttft_ms: 201 }],
        [2, { predicted_ttft_ms: 900 }],
      ],
      'overloaded',
    ],
    [
      'on: the worker over it is skipped, whatever the mode prefers',
      200,
      [
        [1, { predicted_ttft_ms: 900, engine_request: 0 }],
        [2, { predicted_ttft_ms: 150, engine_request: 5 }],
      ],
      '2',
    ],
    ['on: at the limit is not busy', 200, [[1, { predicted_ttft_ms: 200 }]], '1'],
    [
      'on: an unknown prediction is never busy',
      200,
      [
        [1, { predicted_ttft_ms: null }],
        [2, { predicted_ttft_ms: 900 }],
      ],
      '1',
    ],
    [
      'on: a hostile prediction reads as unknown, so not busy',
      200,
      [
        [1, { predicted_ttft_ms: -5 }],
        [2, { predicted_ttft_ms: 'soon' }],
      ],
      '1',
    ],
    [
      'on: one rank without a prediction keeps its worker free',
      200,
      [
        [1, { dp_rank: 0, predicted_ttft_ms: 900 }],
        [1, { dp_rank: 1 }],
        [2, { predicted_ttft_ms: 900 }],
      ],
      '1',
    ],
  ])('%s', (_, limit, reports, expected) => {
    for (const mode of ['predicted-ttft', 'least-loaded', 'round-robin'] as const) {
      const { router, report } = setup({ mode, maxPredictedTtftMs: limit });
      for (const [id, fields] of reports) report(id, fields);
      const decision = router.route('m', new Set(), 1);
      if (expected === 'overloaded') {
        expect(decision, mode).toEqual({
          kind: 'overloaded',
          details: { workers: 2, busy: 2, worker_overloaded: 0, no_credit: 0, tried: 0, checks: { max_predicted_ttft_ms: 2 } },
        });
      } else expect(decision.kind === 'route' && decision.target.workerId, mode).toBe(expected);
    }
  });

  it('a busy worker is free again once its prediction drops or goes stale, and is counted in the busy summary meanwhile', () => {
    const { router, report, advance } = setup({ maxPredictedTtftMs: 100 });
    report(1, { predicted_ttft_ms: 250 });
    expect(router.route('m', new Set(), 1).kind).toBe('overloaded');
    expect(router.busySummary().get('m')).toEqual({ workers: 1, busy: 1 });
    report(1, { predicted_ttft_ms: 80 });
    expect(router.route('m', new Set(), 1).kind).toBe('route');
    report(1, { predicted_ttft_ms: 250 });
    advance(STALE_AFTER_HEARTBEATS * HEARTBEAT + 1);
    expect(router.route('m', new Set(), 1).kind).toBe('route');
    expect(router.busySummary().get('m')).toEqual({ workers: 1, busy: 0 });
  });

  it('the rank asked for is never one the check made busy', () => {
    const { router, report } = setup({ maxPredictedTtftMs: 100 });
    report(1, { dp_rank: 0, predicted_ttft_ms: 500 });
    report(1, { dp_rank: 1, predicted_ttft_ms: 50, active_decode_blocks: 30 });
    const decision = router.route('m', new Set(), 1);
    expect(decision.kind === 'route' && decision.target.dpRank).toBe(1);
  });
});
