import { describe, expect, it } from 'vitest';
import { judgeRank, judgeWorker } from '../../../../src/frontend/routing/busy-rules.js';
import type { Thresholds } from '../../../../src/frontend/routing/contracts.js';
import { parseRankReport, type RankReport } from '../../../../src/frontend/routing/load-report.js';
import { THRESHOLDS_OFF } from './thresholds-off.js';

const rank = (fields: Record<string, unknown>): RankReport => parseRankReport({ worker_id: 1, dp_rank: 0, ...fields });
const only = (changes: Partial<Thresholds>): Thresholds => ({ ...THRESHOLDS_OFF, ...changes });

describe('busy rules (pure, no latch)', () => {
  it('with no threshold configured nothing is ever busy, however loaded', () => {
    const v = judgeRank(rank({ active_decode_blocks: 10_000, kv_total_blocks: 1, active_prefill_tokens: 1e9, max_num_batched_tokens: 1 }), THRESHOLDS_OFF);
    expect(v).toMatchObject({ busy: false, fired: [], missing: [] });
  });

  it('decode check: busy strictly above threshold * kv_total_blocks, kv_used_blocks preferred over active_decode_blocks', () => {
    const t = only({ active_decode_blocks_threshold: 0.5 });
    expect(judgeRank(rank({ active_decode_blocks: 32, kv_total_blocks: 64 }), t).busy).toBe(false);
    expect(judgeRank(rank({ active_decode_blocks: 33, kv_total_blocks: 64 }), t).fired).toEqual(['active_decode_blocks_threshold']);
    // The engine's own count wins when reported: 10 used of 64 is free even if the router's estimate says 60.
    expect(judgeRank(rank({ active_decode_blocks: 60, kv_used_blocks: 10, kv_total_blocks: 64 }), t).busy).toBe(false);
  });

  it('decode check without kv_total_blocks does not fire and says why', () => {
    const v = judgeRank(rank({ active_decode_blocks: 1000 }), only({ active_decode_blocks_threshold: 0.1 }));
    expect(v.busy).toBe(false);
    expect(v.missing).toEqual([{ check: 'active_decode_blocks_threshold', reason: 'kv_total_blocks unknown' }]);
    expect(judgeRank(rank({ active_decode_blocks: 1000, kv_total_blocks: 0 }), only({ active_decode_blocks_threshold: 0.1 })).busy).toBe(false);
  });

  it('prefill check: busy when active_prefill_tokens exceeds the token threshold', () => {
    const t = only({ active_prefill_tokens_threshold: 100 });
    expect(judgeRank(rank({ active_prefill_tokens: 100 }), t).busy).toBe(false);
    expect(judgeRank(rank({ active_prefill_tokens: 101 }), t).fired).toEqual(['active_prefill_tokens_threshold']);
    expect(judgeRank(rank({}), t).missing[0]?.reason).toBe('active_prefill_tokens is not reported');
  });

  it('frac check: busy above frac * max_num_batched_tokens; without max_num_batched_tokens it cannot fire and says so', () => {
    const t = only({ active_prefill_tokens_threshold_frac: 0.5 });
    expect(judgeRank(rank({ active_prefill_tokens: 50, max_num_batched_tokens: 100 }), t).busy).toBe(false);
    expect(judgeRank(rank({ active_prefill_tokens: 51, max_num_batched_tokens: 100 }), t).fired).toEqual(['active_prefill_tokens_threshold_frac']);
    const missing = judgeRank(rank({ active_prefill_tokens: 1e9 }), t);
    expect(missing.busy).toBe(false);
    expect(missing.missing).toEqual([{ check: 'active_prefill_tokens_threshold_frac', reason: 'max_num_batched_tokens unknown' }]);
  });

  it('checks are ORed on a rank; each set check is independent of the others', () => {
    const t = only({ active_decode_blocks_threshold: 0.9, active_prefill_tokens_threshold: 10 });
    expect(judgeRank(rank({ active_decode_blocks: 1, kv_total_blocks: 64, active_prefill_tokens: 11 }), t).fired).toEqual(['active_prefill_tokens_threshold']);
    expect(judgeRank(rank({ active_decode_blocks: 64, kv_total_blocks: 64, active_prefill_tokens: 0 }), t).fired).toEqual(['active_decode_blocks_threshold']);
  });

  it('unknown load (no report, or stale) is free', () => {
    expect(judgeRank(undefined, only({ active_prefill_tokens_threshold: 0 })).busy).toBe(false);
  });

  it('a worker is busy only when all of its ranks are busy (2 dp ranks)', () => {
    const t = only({ active_prefill_tokens_threshold: 10 });
    const busy0 = rank({ dp_rank: 0, active_prefill_tokens: 50 });
    const busy1 = rank({ dp_rank: 1, active_prefill_tokens: 50 });
    const free1 = rank({ dp_rank: 1, active_prefill_tokens: 5 });
    expect(judgeWorker([busy0, free1], t).busy).toBe(false);
    expect(judgeWorker([busy0, busy1], t)).toMatchObject({ busy: true, fired: ['active_prefill_tokens_threshold'] });
    // A rank whose load is unknown (stale) keeps the worker free.
    expect(judgeWorker([busy0, undefined], t).busy).toBe(false);
    expect(judgeWorker([], t).busy).toBe(false);
  });
});

describe('load reports', () => {
  it('reads a Dynamo ActiveLoad with only some counters, and our full event', () => {
    expect(parseRankReport({ worker_id: 7, active_decode_blocks: 3 })).toMatchObject({
      workerId: '7',
      dpRank: 0,
      activeDecodeBlocks: 3,
      activePrefillTokens: undefined,
      kvTotalBlocks: undefined,
    });
    const full = parseRankReport({
      worker_id: '18446744073709551615',
      dp_rank: 1,
      kv_used_blocks: null,
      model: 'm',
      grpc_address: '10.0.0.1:50050',
      heartbeat_ms: 500,
      overloaded: true,
    });
    expect(full).toMatchObject({
      workerId: '18446744073709551615',
      dpRank: 1,
      kvUsedBlocks: undefined,
      model: 'm',
      grpcAddress: '10.0.0.1:50050',
      heartbeatMs: 500,
      overloaded: true,
    });
  });

  it('refuses what would route wrongly, naming the field', () => {
    expect(() => parseRankReport(null)).toThrow(/JSON object/);
    expect(() => parseRankReport({ worker_id: -1 })).toThrow(/worker_id/);
    expect(() => parseRankReport({ worker_id: '18446744073709551616' })).toThrow(/worker_id/);
    expect(() => parseRankReport({ worker_id: 1, active_prefill_tokens: -5 })).toThrow(/active_prefill_tokens/);
    expect(() => parseRankReport({ worker_id: 1, kv_total_blocks: 'lots' })).toThrow(/kv_total_blocks/);
    expect(() => parseRankReport({ worker_id: 1, grpc_address: 'no-port' })).toThrow(/grpc_address/);
    expect(() => parseRankReport({ worker_id: 1, dp_rank: 1.5 })).toThrow(/dp_rank/);
  });
});

describe('the TTFT SLO check with a published prefill model', () => {
  const withModel = (ahead: number): RankReport =>
    parseRankReport({ worker_id: 1, ttft_base_ms: 100, prefill_tokens_per_s: 10_000, prefill_tokens_ahead: ahead, kv_free_blocks: 100, kv_block_size: 16 });

  it("judges the request's own prompt: busy when base + (ahead + prompt) / rate exceeds the SLO", () => {
    expect(judgeRank(withModel(3000), THRESHOLDS_OFF, 500, 500).fired).toEqual([]); // 100 + 350 ms
    expect(judgeRank(withModel(3000), THRESHOLDS_OFF, 500, 1500).fired).toEqual(['max_predicted_ttft_ms']); // 100 + 450 ms
  });

  it('is never busy with no prefill ahead, however slow its model: that request is the probe that relearns it', () => {
    expect(judgeRank(withModel(0), THRESHOLDS_OFF, 50, 2000).fired).toEqual([]);
    expect(judgeRank(withModel(1), THRESHOLDS_OFF, 50, 2000).fired).toEqual(['max_predicted_ttft_ms']);
  });
});
