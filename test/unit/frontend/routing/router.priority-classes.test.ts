/**
 * The router with priority classes: every threshold (the fourth check's too) times the class's
 * scale, so a low class sees a worker busy before a high one does; no classes, or a priority
 * below every key, decides exactly as before. The retry after a refusal goes through the same
 * class-scaled decision.
 */
import { describe, expect, it } from 'vitest';
import type { Thresholds } from '../../../../src/frontend/routing/contracts.js';
import { parseRankReport } from '../../../../src/frontend/routing/load-report.js';
import { parsePriorityScaleList } from '../../../../src/frontend/routing/priority-classes.js';
import { WorkerRouter } from '../../../../src/frontend/routing/router.js';
import { ThresholdStore } from '../../../../src/frontend/routing/thresholds.js';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';

const HEARTBEAT = 100;
const none = new Set<string>();

function scales(text: string) {
  const parsed = parsePriorityScaleList(text);
  if ('problem' in parsed) throw new Error(parsed.problem);
  return parsed;
}

function setup(thresholds: Partial<Thresholds>, scaleList = '', maxPredictedTtftMs: number | null = null) {
  const now = 10_000;
  const pool = new WorkerPool({ defaultHeartbeatMs: HEARTBEAT, leaseMs: 1000, maxWorkers: 100 });
  const store = new ThresholdStore({ ...THRESHOLDS_OFF, ...thresholds }, scales(scaleList));
  const router = new WorkerRouter(
    { mode: 'least-loaded', kvBlockSize: 16, trackOutputBlocks: false, maxPredictedTtftMs },
    { pool, thresholds: store, now: () => now, random: () => 0, logger: recordingLogger() },
  );
  const report = (id: number, fields: Record<string, unknown>) =>
    pool.apply(
      parseRankReport({ worker_id: id, model: 'm', grpc_address: `127.0.0.1:${5000 + id}`, heartbeat_ms: HEARTBEAT, kv_total_blocks: 100, ...fields }),
      now,
      'push',
    );
  return { router, store, report };
}

describe('routing by priority class', () => {
  it.each([
    ['decode blocks', { active_decode_blocks_threshold: 0.5 }, { kv_used_blocks: 30 }],
    ['prefill tokens', { active_prefill_tokens_threshold: 1000 }, { active_prefill_tokens: 600 }],
    ['prefill fraction', { active_prefill_tokens_threshold_frac: 0.5 }, { active_prefill_tokens: 600, max_num_batched_tokens: 2000 }],
  ] as const)('%s: busy for the low class (scale 0.5), free for the high class and the default', (_name, thresholds, load) => {
    const { router, report } = setup(thresholds, '5=0.5');
    report(1, load);
    expect(router.route('m', none, 1, 5)).toMatchObject({ kind: 'overloaded', details: { busy: 1 } });
    expect(router.route('m', none, 1, 100)).toMatchObject({ kind: 'overloaded' });
    expect(router.route('m', none, 1, 4).kind).toBe('route');
    expect(router.route('m', none, 1, 0).kind).toBe('route');
    expect(router.route('m', none, 1).kind).toBe('route');
  });

  it('scales the fourth check (--max-predicted-ttft-ms) too', () => {
    const { router, report } = setup({}, '5=0.5', 200);
    report(1, { predicted_ttft_ms: 150 });
    expect(router.route('m', none, 1, 5).kind).toBe('overloaded');
    expect(router.route('m', none, 1, 0).kind).toBe('route');
  });

  it('a scale above 1 lets a class through where the default class is refused', () => {
    const { router, report } = setup({ active_prefill_tokens_threshold: 100 }, '-10=4');
    report(1, { active_prefill_tokens: 300 });
    expect(router.route('m', none, 1, 0).kind).toBe('route');
    expect(router.route('m', none, 1, -11).kind).toBe('overloaded');
  });

  it('without classes, every priority is decided as before', () => {
    const { router, report } = setup({ active_prefill_tokens_threshold: 100 });
    report(1, { active_prefill_tokens: 101 });
    report(2, { active_prefill_tokens: 99 });
    for (const priority of [undefined, -5, 0, 7]) {
      const decision = router.route('m', none, 1, priority);
      expect(decision.kind === 'route' && decision.target.workerId).toBe('2');
    }
  });

  it('a retry after a refusal is decided by the class: the low class gets overloaded, the high class goes to the other worker', () => {
    const { router, report } = setup({ active_prefill_tokens_threshold: 1000 }, '5=0.1');
    report(1, { active_prefill_tokens: 0 });
    report(2, { active_prefill_tokens: 200 });
    // Worker 1 refused (RESOURCE_EXHAUSTED): it is in the request's tried set.
    const tried = new Set(['1']);
    expect(router.route('m', tried, 1, 5)).toMatchObject({ kind: 'overloaded', details: { tried: 1, busy: 1 } });
    const retry = router.route('m', tried, 1, 0);
    expect(retry.kind === 'route' && retry.target.workerId).toBe('2');
  });

  it('reads the model list at every decision: a /busy_threshold change applies to the next request', () => {
    const { router, store, report } = setup({ active_prefill_tokens_threshold: 100 });
    report(1, { active_prefill_tokens: 60 });
    expect(router.route('m', none, 1, 3).kind).toBe('route');
    store.setPriorityScales('m', scales('3=0.5'));
    expect(router.route('m', none, 1, 3).kind).toBe('overloaded');
    store.setPriorityScales('m', []);
    expect(router.route('m', none, 1, 3).kind).toBe('route');
  });

  it('picks a dp rank that is free for the class', () => {
    const { router, report } = setup({ active_prefill_tokens_threshold: 100 }, '5=0.5');
    report(1, { dp_rank: 0, active_prefill_tokens: 70 });
    report(1, { dp_rank: 1, active_prefill_tokens: 10 });
    for (let i = 0; i < 3; i++) {
      const decision = router.route('m', none, 1, 5);
      expect(decision.kind === 'route' && decision.target.dpRank).toBe(1);
    }
  });
});
