// The simulated engine without gRPC, under a fake clock: dp rank picking, Abort, GetLoads
// numbers, deadlines and shutdown, seen through a recording sink.
import { describe, expect, it } from 'vitest';
import type { GenerateRequestMessage, GenerateResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { EngineCore, type GenerateCallContext, type GenerateSink } from '../../../../src/tools/engine/engine-core.js';
import { resolveEngineOptions, type EngineOptions } from '../../../../src/tools/engine/options.js';
import { InvalidRequestError } from '../../../../src/tools/engine/request.js';
import { FakeTimers } from '../../../support/fake-timers.js';

class RecordingSink implements GenerateSink {
  readonly messages: GenerateResponseMessage[] = [];
  ending: { code: GrpcStatus; details: string } | undefined;

  write(message: GenerateResponseMessage): void {
    if (this.ending) throw new Error(`write after the call ended: ${JSON.stringify(message)}`);
    this.messages.push(message);
  }
  end(): void {
    if (this.ending) throw new Error('ended twice');
    this.ending = { code: GrpcStatus.OK, details: '' };
  }
  fail(code: GrpcStatus, details: string): void {
    if (this.ending) throw new Error('ended twice');
    this.ending = { code, details };
  }

  get streamed(): number[] {
    return this.messages.flatMap((m) => m.chunk?.token_ids ?? []);
  }
}

// 16-token blocks, 10 ms decode steps, prefill 1 ms per 100 tokens.
function setup(overrides: Partial<EngineOptions> = {}) {
  const timers = new FakeTimers();
  const options = resolveEngineOptions({ numGpuBlocks: 100, blockSize: 16, decodeStepMs: 10, prefillTokensPerS: 100_000, ...overrides });
  const core = new EngineCore(options, timers);
  const start = (request: Partial<GenerateRequestMessage> & { request_id: string }, context: GenerateCallContext = {}) => {
    const sink = new RecordingSink();
    const call = core.generate({ tokenized: { input_ids: prompt(40) }, stream: true, sampling_params: { max_tokens: 1000 }, ...request }, context, sink);
    return { sink, call };
  };
  return { timers, core, start };
}

function prompt(length: number, first = 1): number[] {
  return Array.from({ length }, (_, i) => first + i);
}

describe('EngineCore dp ranks', () => {
  it('builds one scheduler with a KV pool of --num-gpu-blocks per rank', () => {
    const { core } = setup({ dataParallelSize: 3 });
    expect(core.rankStats().map((s) => s.totalBlocks)).toEqual([100, 100, 100]);
    expect(core.stats().totalBlocks).toBe(300);
  });

  it('runs a call on the rank its data_parallel_rank names', () => {
    const { core, start, timers } = setup({ dataParallelSize: 2 });
    expect(start({ request_id: 'a', data_parallel_rank: 1 }).call.rank).toBe(1);
    timers.advance(1);
    expect(core.rankStats().map((s) => s.running)).toEqual([0, 1]);
    expect(core.rankStats()[0]!.usedBlocks).toBe(0);
    expect(core.rankStats()[1]!.usedBlocks).toBe(3);
  });

  it('takes the x-data-parallel-rank metadata when the field is unset', () => {
    const { start } = setup({ dataParallelSize: 4 });
    expect(start({ request_id: 'a' }, { metadataRank: '3' }).call.rank).toBe(3);
    expect(start({ request_id: 'b', data_parallel_rank: 2 }, { metadataRank: '3' }).call.rank).toBe(2);
  });

  it('picks the rank with the fewest running + waiting calls, the lowest on ties', () => {
    const { start } = setup({ dataParallelSize: 3, maxNumSeqs: 1 });
    const ranks = ['a', 'b', 'c', 'd'].map((id) => start({ request_id: id }).call.rank);
    expect(ranks).toEqual([0, 1, 2, 0]);
    // Rank 0 has two (one waiting behind max_num_seqs 1): the next goes to rank 1, then rank 2.
    start({ request_id: 'pinned', data_parallel_rank: 1 });
    expect(start({ request_id: 'e' }).call.rank).toBe(2);
    expect(start({ request_id: 'f' }).call.rank).toBe(0);
  });

  it('refuses a data_parallel_rank out of range without starting anything', () => {
    const { core, start } = setup({ dataParallelSize: 2 });
    expect(() => start({ request_id: 'a', data_parallel_rank: 2 })).toThrow(InvalidRequestError);
    expect(() => start({ request_id: 'a' }, { metadataRank: '5' })).toThrow(/x-data-parallel-rank "5"/);
    expect(core.activeCalls).toBe(0);
    expect(core.stats()).toMatchObject({ running: 0, waiting: 0 });
  });
});

describe('EngineCore Abort', () => {
  it('ends a running streamed call with an empty chunk and a complete (finish_reason "abort") repeating it, then OK, and frees its blocks at once', () => {
    const { core, start, timers } = setup();
    const { sink } = start({ request_id: 'x' });
    timers.advance(31); // prefill (0.4 ms), then three decode steps: 4 tokens
    const streamed = sink.streamed;
    expect(streamed.length).toBeGreaterThan(1);
    expect(core.stats().usedBlocks).toBe(3);
    expect(core.abort(['x'])).toBe(1);
    expect(core.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
    expect(core.activeCalls).toBe(0);
    expect(sink.messages.slice(-2)).toEqual([
      { chunk: { token_ids: [], prompt_tokens: 40, completion_tokens: 0, cached_tokens: 0 } },
      { complete: { output_ids: [], finish_reason: 'abort', prompt_tokens: 40, completion_tokens: 0, cached_tokens: 0 } },
    ]);
    expect(sink.ending).toEqual({ code: GrpcStatus.OK, details: '' });
    const seen = sink.messages.length;
    timers.advance(100);
    expect(sink.messages).toHaveLength(seen);
  });

  it('ends a waiting call the same way, with no tokens, and leaves the others running', () => {
    const { core, start, timers } = setup({ maxNumSeqs: 1 });
    const running = start({ request_id: 'r' });
    const waiting = start({ request_id: 'w', stream: false });
    timers.advance(5);
    expect(core.stats()).toMatchObject({ running: 1, waiting: 1 });
    core.abort(['w']);
    expect(waiting.sink.messages).toEqual([
      { complete: { output_ids: [], finish_reason: 'abort', prompt_tokens: 40, completion_tokens: 0, cached_tokens: 0 } },
    ]);
    expect(waiting.sink.ending?.code).toBe(GrpcStatus.OK);
    expect(core.stats()).toMatchObject({ running: 1, waiting: 0 });
    expect(running.sink.ending).toBeUndefined();
  });

  it('sends a non-streaming call only the complete, with every token so far', () => {
    const { start, core, timers } = setup();
    const { sink } = start({ request_id: 'n', stream: false });
    timers.advance(25);
    core.abort(['n']);
    expect(sink.messages).toHaveLength(1);
    expect(sink.messages[0]!.complete).toMatchObject({ finish_reason: 'abort', completion_tokens: 3 });
    expect(sink.messages[0]!.complete!.output_ids).toHaveLength(3);
  });

  it('ends every call sharing an aborted id, ignores unknown ids, and leaves other ids alone', () => {
    const { core, start, timers } = setup({ dataParallelSize: 2 });
    const a1 = start({ request_id: 'a' });
    const a2 = start({ request_id: 'a' });
    const b = start({ request_id: 'b' });
    timers.advance(15);
    expect(core.abort(['nope', 'a', 'a'])).toBe(2);
    expect([a1, a2].map((c) => c.sink.messages.at(-1)?.complete?.finish_reason)).toEqual(['abort', 'abort']);
    expect(b.sink.ending).toBeUndefined();
    expect(core.activeCalls).toBe(1);
    expect(core.abort(['a'])).toBe(0);
  });

  it('does nothing to a call that has already finished', () => {
    const { core, start, timers } = setup();
    const { sink } = start({ request_id: 'f', sampling_params: { max_tokens: 2 } });
    timers.advance(100);
    expect(sink.messages.at(-1)?.complete?.finish_reason).toBe('length');
    const seen = sink.messages.length;
    expect(core.abort(['f'])).toBe(0);
    expect(sink.messages).toHaveLength(seen);
  });
});

describe('EngineCore loads', () => {
  it('reports each rank: requests, tokens in used and total blocks, usage, max_running_requests', () => {
    const { core, start, timers } = setup({ dataParallelSize: 2, maxNumSeqs: 1 });
    start({ request_id: 'a', data_parallel_rank: 1 });
    start({ request_id: 'b', data_parallel_rank: 1 });
    timers.advance(1);
    expect(core.loads()).toEqual([
      {
        dp_rank: 0,
        num_running_reqs: 0,
        num_waiting_reqs: 0,
        num_total_reqs: 0,
        num_used_tokens: 0,
        max_total_num_tokens: 1600,
        token_usage: 0,
        gen_throughput: 0,
        cache_hit_rate: 0,
        utilization: 0,
        max_running_requests: 1,
      },
      {
        dp_rank: 1,
        num_running_reqs: 1,
        num_waiting_reqs: 1,
        num_total_reqs: 2,
        num_used_tokens: 48,
        max_total_num_tokens: 1600,
        token_usage: 0.03,
        gen_throughput: 0,
        cache_hit_rate: 0,
        utilization: 0,
        max_running_requests: 1,
      },
    ]);
    expect(core.loads(1)).toEqual([core.loads()[1]]);
    expect(core.loads(0).map((l) => l.dp_rank)).toEqual([0]);
  });

  it.each([-1, 2])('refuses dp_rank %d outside [0, 2), naming it', (rank) => {
    const { core } = setup({ dataParallelSize: 2 });
    expect(() => core.loads(rank)).toThrow(new InvalidRequestError(`dp_rank ${rank} is out of range [0, 2) (data parallel size 2)`));
  });

  it('sums the ranks for GetServerInfo', () => {
    const { core, start, timers } = setup({ dataParallelSize: 2 });
    start({ request_id: 'a', data_parallel_rank: 0 });
    start({ request_id: 'b', data_parallel_rank: 1 });
    timers.advance(1);
    expect(core.serverInfoCounts()).toEqual({ num_running: 2, num_waiting: 0, kv_used_blocks: 6, kv_total_blocks: 200 });
  });
});

describe('EngineCore endings', () => {
  it('fails a call at its deadline with DEADLINE_EXCEEDED and frees its blocks', () => {
    const { core, start, timers } = setup();
    const { sink } = start({ request_id: 'd' }, { timeoutMs: 50 });
    timers.advance(49);
    expect(core.stats().running).toBe(1);
    timers.advance(1);
    expect(sink.ending).toEqual({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'deadline exceeded' });
    expect(core.stats()).toMatchObject({ running: 0, usedBlocks: 0 });
    expect(timers.active).toBe(0);
  });

  it('clears the deadline timer of a call that finishes first', () => {
    const { start, timers } = setup();
    const { sink } = start({ request_id: 'q', sampling_params: { max_tokens: 1 } }, { timeoutMs: 10_000 });
    timers.advance(5);
    expect(sink.ending?.code).toBe(GrpcStatus.OK);
    expect(timers.active).toBe(0);
  });

  it('drops a cancelled call without a word, and failAll ends the rest with the status given', () => {
    const { core, start, timers } = setup({ dataParallelSize: 2 });
    const cancelled = start({ request_id: 'c' });
    const others = [start({ request_id: 'o1' }), start({ request_id: 'o2' })];
    timers.advance(15);
    const seen = cancelled.sink.messages.length;
    cancelled.call.cancel();
    cancelled.call.cancel();
    expect(cancelled.sink.messages).toHaveLength(seen);
    expect(cancelled.sink.ending).toBeUndefined();
    core.failAll(GrpcStatus.UNAVAILABLE, 'shutting down');
    expect(others.map((o) => o.sink.ending)).toEqual([
      { code: GrpcStatus.UNAVAILABLE, details: 'shutting down' },
      { code: GrpcStatus.UNAVAILABLE, details: 'shutting down' },
    ]);
    expect(core.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
    expect(core.activeCalls).toBe(0);
  });
});

describe('EngineCore wasted tokens', () => {
  const wasted = (core: EngineCore) => {
    const s = core.stats();
    return { cancelled: s.wastedCancelledTokens, deadline: s.wastedDeadlineTokens, preempted: s.wastedPreemptedTokens };
  };

  // A 40-token prompt prefills in 0.4 ms and samples its first token; then one token per 10 ms step.
  it('counts the prompt and the tokens of a call the client cancels mid-generation as cancelled', () => {
    const { core, start, timers } = setup();
    const { sink, call } = start({ request_id: 'c' });
    timers.advance(25);
    expect(sink.streamed).toHaveLength(3);
    call.cancel();
    expect(wasted(core)).toEqual({ cancelled: 43, deadline: 0, preempted: 0 });
  });

  it('counts an Abort as cancelled and a call ended by its deadline as deadline', () => {
    const { core, start, timers } = setup({ dataParallelSize: 2 });
    start({ request_id: 'a', data_parallel_rank: 0 });
    start({ request_id: 'd', data_parallel_rank: 1 }, { timeoutMs: 15 });
    timers.advance(15); // 'd': 2 tokens (0.4, 10.4 ms) when its deadline strikes
    expect(core.abort(['a'])).toBe(1);
    expect(wasted(core)).toEqual({ cancelled: 42, deadline: 42, preempted: 0 });
    expect(core.rankStats().map((s) => s.wastedDeadlineTokens)).toEqual([0, 42]);
  });

  it("counts the transport's deadline cancel as deadline, and nothing for calls that complete or are failed at shutdown", () => {
    const { core, start, timers } = setup();
    const late = start({ request_id: 'l' });
    const done = start({ request_id: 'q', sampling_params: { max_tokens: 2 } });
    const shut = start({ request_id: 's' });
    timers.advance(25); // 'l' alone for 0.4 ms, then with the two others: tokens at 0.4, 11.2, 21.2 ms
    expect(done.sink.ending?.code).toBe(GrpcStatus.OK);
    done.call.cancel();
    late.call.cancel('deadline');
    core.failAll(GrpcStatus.UNAVAILABLE, 'shutting down');
    expect(shut.sink.ending?.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(late.sink.streamed).toHaveLength(3);
    expect(wasted(core)).toEqual({ cancelled: 0, deadline: 43, preempted: 0 });
  });
});

describe('EngineCore step cost', () => {
  /** Tokens each of `calls` streamed calls (200-token prompts) has after `ms` of fake time. */
  function tokensPerCall(overrides: Partial<EngineOptions>, calls: number, ms: number): number[] {
    const timers = new FakeTimers();
    const core = new EngineCore(resolveEngineOptions({ numGpuBlocks: 4096, ...overrides }), timers);
    const sinks = Array.from({ length: calls }, (_, i) => {
      const sink = new RecordingSink();
      core.generate(
        { request_id: `r${i}`, tokenized: { input_ids: prompt(200, 1 + i * 1000) }, stream: true, sampling_params: { max_tokens: 10_000 } },
        {},
        sink,
      );
      return sink;
    });
    timers.advance(ms);
    core.close();
    return sinks.map((sink) => sink.streamed.length);
  }

  it('with a preset, each call streams slower as more calls share the steps, as on the GPU', () => {
    const preset = { preset: 'qwen2.5-7b-fp16-l4' };
    const alone = tokensPerCall(preset, 1, 5000)[0]!;
    const crowded = tokensPerCall(preset, 64, 5000);
    expect(alone).toBeGreaterThan(80); // about 58 ms a token
    expect(Math.max(...crowded)).toBeLessThan(alone * 0.95);
  });

  it('without a preset, a call streams at the fixed step however many calls run', () => {
    const fixed = { decodeStepMs: 10, prefillTokensPerS: 1e9, maxNumBatchedTokens: 100_000 };
    const alone = tokensPerCall(fixed, 1, 1000)[0]!;
    expect(tokensPerCall(fixed, 64, 1000).every((n) => Math.abs(n - alone) <= 1)).toBe(true);
  });

  it('stretches every step by --time-scale', () => {
    const preset = { preset: 'qwen2.5-7b-fp16-l4' };
    const normal = tokensPerCall(preset, 1, 5000)[0]!;
    const slow = tokensPerCall({ ...preset, timeScale: 2 }, 1, 5000)[0]!;
    expect(Math.abs(slow - normal / 2)).toBeLessThanOrEqual(1);
  });
});
