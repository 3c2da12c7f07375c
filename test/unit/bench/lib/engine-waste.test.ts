// The overload sweep's reading of the engines' wasted tokens: the engine's own /metrics text,
// summed per reason over ranks and engines; a scrape without the series is an error, not zeros.
import { describe, expect, it } from 'vitest';
import { addWastedTokens, parseInFlight, parseWastedTokens } from '../../../../bench/lib/engine-waste.js';
import { createEngineRegistry } from '../../../../src/tools/engine/metrics-endpoint.js';
import type { SchedulerStats } from '../../../../src/tools/engine/scheduler.js';

function rank(wastedCancelledTokens: number, wastedDeadlineTokens: number, wastedPreemptedTokens: number): SchedulerStats {
  const zero = { running: 0, waiting: 0, usedBlocks: 0, totalBlocks: 8, generatedTokens: 0, prefilledTokens: 0, preemptions: 0 };
  return { ...zero, wastedCancelledTokens, wastedDeadlineTokens, wastedPreemptedTokens };
}

describe('bench parseWastedTokens', () => {
  it("sums the engine's series per reason over its dp ranks", async () => {
    const source = {
      modelName: 'm',
      numGpuBlocks: 8,
      blockSize: 16,
      maxNumSeqs: 4,
      maxNumBatchedTokens: 64,
      rankStats: () => [rank(1, 2, 3), rank(10, 20, 30)],
    };
    const text = await createEngineRegistry(source).metrics();
    expect(parseWastedTokens(text)).toEqual({ cancelled: 11, deadline: 22, preempted: 33 });
  });

  it('counts a reason absent from the text as 0 and adds engines reason by reason', () => {
    const text =
      'vllm:num_preemptions_total{model_name="m",engine="0"} 4\ndynamo_sim_engine_wasted_tokens_total{model_name="m",engine="0",reason="preempted"} 7\n';
    const one = parseWastedTokens(text);
    expect(one).toEqual({ cancelled: 0, deadline: 0, preempted: 7 });
    expect(addWastedTokens(one, { cancelled: 1, deadline: 2, preempted: 3 })).toEqual({ cancelled: 1, deadline: 2, preempted: 10 });
  });

  it('counts the sequences an engine still holds over its ranks', async () => {
    const busy = { ...rank(0, 0, 0), running: 2, waiting: 1 };
    const source = { modelName: 'm', numGpuBlocks: 8, blockSize: 16, maxNumSeqs: 4, maxNumBatchedTokens: 64, rankStats: () => [busy, { ...busy, waiting: 4 }] };
    expect(parseInFlight(await createEngineRegistry(source).metrics())).toBe(9);
    expect(parseInFlight('vllm:num_requests_running{engine="0"} 0\n')).toBe(0);
  });

  it('refuses a scrape without the series, or with a reason it does not know', () => {
    expect(() => parseWastedTokens('vllm:num_preemptions_total{model_name="m",engine="0"} 4\n')).toThrow(/no dynamo_sim_engine_wasted_tokens_total/);
    expect(() => parseWastedTokens('dynamo_sim_engine_wasted_tokens_total{engine="0",reason="other"} 1\n')).toThrow(/unexpected/);
  });
});
