// The simulated engine's /metrics text, read back with the sidecar's own parser: each dp rank's
// series carry vLLM's `engine` label and the reader finds every rank's blocks in use.
import { describe, expect, it } from 'vitest';
import { parseEngineMetrics } from '../../../../src/sidecar/load/engine-metrics-reader.js';
import { createEngineRegistry } from '../../../../src/tools/engine/metrics-endpoint.js';
import type { SchedulerStats } from '../../../../src/tools/engine/scheduler.js';

function stats(usedBlocks: number, running: number, waiting: number, generatedTokens = 0): SchedulerStats {
  return {
    running,
    waiting,
    usedBlocks,
    totalBlocks: 100,
    generatedTokens,
    prefilledTokens: 0,
    preemptions: 0,
    wastedCancelledTokens: 0,
    wastedDeadlineTokens: 0,
    wastedPreemptedTokens: 0,
  };
}

const source = (ranks: SchedulerStats[]) => ({
  modelName: 'm',
  numGpuBlocks: 100,
  blockSize: 16,
  maxNumSeqs: 8,
  maxNumBatchedTokens: 512,
  rankStats: () => ranks,
});

describe('engine /metrics', () => {
  it("gives each dp rank its own series, which the sidecar's reader maps to that rank's used blocks", async () => {
    const text = await createEngineRegistry(source([stats(0, 0, 0), stats(37, 2, 1), stats(100, 5, 4)])).metrics();
    const read = parseEngineMetrics(text);
    expect(read.problems).toEqual([]);
    expect(read.format).toBe('vllm');
    expect([...read.ranks.keys()]).toEqual([0, 1, 2]);
    expect(read.ranks.get(0)).toEqual({ kvUsagePerc: 0, kvTotalBlocks: 100, kvUsedBlocks: 0, blockSize: 16, running: 0, waiting: 0 });
    expect(read.ranks.get(1)).toMatchObject({ kvUsedBlocks: 37, running: 2, waiting: 1 });
    expect(read.ranks.get(2)).toMatchObject({ kvUsedBlocks: 100, kvUsagePerc: 1, running: 5, waiting: 4 });
  });

  it('labels the counters per rank and writes cache_config_info once, without a rank', async () => {
    const text = await createEngineRegistry(source([stats(1, 1, 0, 7), stats(2, 1, 0, 9)])).metrics();
    expect(text).toContain('vllm:generation_tokens_total{model_name="m",engine="0"} 7');
    expect(text).toContain('vllm:generation_tokens_total{model_name="m",engine="1"} 9');
    expect(text.match(/^vllm:cache_config_info\{/gm)).toHaveLength(1);
    expect(text).not.toMatch(/^vllm:cache_config_info\{[^}]*engine=/m);
  });

  it('exports the wasted tokens per rank and reason', async () => {
    const rank1 = { ...stats(0, 0, 0), wastedCancelledTokens: 11, wastedDeadlineTokens: 12, wastedPreemptedTokens: 13 };
    const text = await createEngineRegistry(source([stats(0, 0, 0), rank1])).metrics();
    expect(text).toContain('dynamo_sim_engine_wasted_tokens_total{model_name="m",engine="0",reason="cancelled"} 0');
    expect(text).toContain('dynamo_sim_engine_wasted_tokens_total{model_name="m",engine="1",reason="cancelled"} 11');
    expect(text).toContain('dynamo_sim_engine_wasted_tokens_total{model_name="m",engine="1",reason="deadline"} 12');
    expect(text).toContain('dynamo_sim_engine_wasted_tokens_total{model_name="m",engine="1",reason="preempted"} 13');
  });

  it('with one rank, labels it engine="0" and the reader sees rank 0 alone', async () => {
    const text = await createEngineRegistry(source([stats(25, 1, 0)])).metrics();
    expect(text).toContain('vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.25');
    const read = parseEngineMetrics(text, 'vllm');
    expect([...read.ranks.keys()]).toEqual([0]);
    expect(read.ranks.get(0)).toMatchObject({ kvUsedBlocks: 25, kvTotalBlocks: 100 });
  });
});
