// What each protocol's answers tell about the engine. Every answer is written byte by byte from
// the upstream field numbers (vLLM's control.proto at 1f9444a3, SMG's vllm_engine.proto, SGLang's
// runtime/v1 JSON keys), never produced by this project's .proto files.
import { describe, expect, it } from 'vitest';
import { factQuestions, type AcceptFact, type BoundedFact } from '../../../../src/protocol/engine/engine-facts.js';
import type { GenerateWire } from '../../../../src/protocol/engine/generate-wire.js';
import { bytes, msg, num, str } from '../../../support/proto-bytes.js';

function read(wire: GenerateWire, rpc: string, body: Buffer, accept?: AcceptFact) {
  const question = factQuestions(wire).find((q) => q.rpc === rpc);
  if (!question) throw new Error(`${wire} asks no ${rpc}`);
  return question.read(body, accept);
}

/** An accept that refuses the fields named in `refuse` and records every question it was asked. */
function judge(refuse: readonly string[] = []): { accept: AcceptFact; asked: [BoundedFact, string, number][] } {
  const asked: [BoundedFact, string, number][] = [];
  return {
    asked,
    accept: (fact, field, value) => {
      asked.push([fact, field, value]);
      return refuse.includes(field) ? undefined : value;
    },
  };
}

describe('factQuestions', () => {
  it('asks each protocol through its own RPCs', () => {
    expect(factQuestions('vllm').map((q) => q.path)).toEqual(['/vllm.grpc.engine.VllmEngine/GetModelInfo', '/vllm.grpc.engine.VllmEngine/GetLoads']);
    expect(factQuestions('sglang').map((q) => q.path)).toEqual([
      '/sglang.grpc.scheduler.SglangScheduler/GetModelInfo',
      '/sglang.grpc.scheduler.SglangScheduler/GetLoads',
    ]);
    expect(factQuestions('vllm-native').map((q) => q.path)).toEqual(['/vllm.Control/GetServerInfo', '/vllm.Control/GetModelInfo']);
    expect(factQuestions('sglang-native').map((q) => q.path)).toEqual(['/sglang.runtime.v1.SglangService/GetServerInfo']);
  });
});

describe("vLLM's own Control", () => {
  // ServerInfo: engine_version 1, api_version 2, parallelism 4 {tp 1, pp 2, dp 3, dp rank 4}, max_model_len 5,
  // kv_block_size 6, total_kv_blocks 7 (all dp engines), max_running_requests 8, max_batched_tokens 9, max_loras 10.
  const serverInfo = (dp: number, startRank: number, totalBlocks: number | bigint): Buffer =>
    msg(
      str(1, '0.11.0'),
      str(2, 'vllm'),
      str(3, 'instance'),
      bytes(4, [...num(1, 2), ...num(2, 1), ...num(3, dp), ...num(4, startRank)]),
      num(5, 8192),
      num(6, 16),
      num(7, totalBlocks),
      num(8, 256),
      num(9, 4096),
      num(10, 4),
    );

  it('GetServerInfo: KV blocks per rank (the total divided by the dp size), max_num_seqs over all ranks, and the rest as told', () => {
    expect(read('vllm-native', 'Control/GetServerInfo', serverInfo(2, 0, 20_001))).toEqual({
      maxModelLen: 8192,
      kvBlockSize: 16,
      kvTotalBlocks: 10_000,
      maxRunningRequests: 512,
      maxNumBatchedTokens: 4096,
      dataParallelSize: 2,
      dataParallelStartRank: 0,
    });
    expect(read('vllm-native', 'Control/GetServerInfo', serverInfo(1, 2, 2 ** 40))).toMatchObject({ kvTotalBlocks: 2 ** 40, dataParallelStartRank: 2 });
  });

  it('GetServerInfo: zeros are unknown, and a missing parallelism means one rank', () => {
    expect(read('vllm-native', 'Control/GetServerInfo', msg(str(2, 'vllm'), num(7, 100), num(8, 8)))).toEqual({ kvTotalBlocks: 100, maxRunningRequests: 8 });
    expect(read('vllm-native', 'Control/GetServerInfo', msg(num(5, 0), num(6, 0)))).toEqual({});
  });

  it('GetModelInfo: served_model_name 2, else model_id 1', () => {
    expect(read('vllm-native', 'Control/GetModelInfo', msg(str(1, 'meta-llama/Llama-3.1-8B'), str(2, 'llama')))).toEqual({ model: 'llama' });
    expect(read('vllm-native', 'Control/GetModelInfo', msg(str(1, 'meta-llama/Llama-3.1-8B'), str(2, '  ')))).toEqual({ model: 'meta-llama/Llama-3.1-8B' });
    expect(() => read('vllm-native', 'Control/GetModelInfo', Buffer.from([0xff, 0xff]))).toThrow();
  });
});

describe("SGLang's own GetServerInfo (JSON in json_info 1)", () => {
  const serverInfo = (info: unknown): Buffer => msg(str(1, JSON.stringify(info)));

  it('reads the KV geometry in pages, the whole server max_running_requests, and dp ranks only with dp attention', () => {
    const info = {
      served_model_name: 'qwen',
      model_path: '/models/qwen',
      page_size: 16,
      max_total_num_tokens: 65_537,
      max_running_requests: 128,
      max_prefill_tokens: 16_384,
      chunked_prefill_size: 8192,
      dp_size: 2,
      enable_dp_attention: true,
      context_length: 32_768,
      incremental_streaming_output: true,
    };
    expect(read('sglang-native', 'GetServerInfo', serverInfo(info))).toEqual({
      model: 'qwen',
      kvBlockSize: 16,
      kvTotalBlocks: 4097,
      maxRunningRequests: 128,
      maxNumBatchedTokens: 16_384,
      dataParallelSize: 2,
      maxModelLen: 32_768,
      incrementalOutput: true,
    });
    expect(read('sglang-native', 'GetServerInfo', serverInfo({ ...info, enable_dp_attention: false, incremental_streaming_output: false }))).toMatchObject({
      dataParallelSize: 1,
      incrementalOutput: false,
    });
  });

  it('leaves hostile or absent values unknown and refuses what is not a JSON object', () => {
    expect(
      read(
        'sglang-native',
        'GetServerInfo',
        serverInfo({ page_size: -1, max_total_num_tokens: 'many', max_running_requests: null, context_length: 1.5, served_model_name: 7 }),
      ),
    ).toEqual({});
    expect(() => read('sglang-native', 'GetServerInfo', serverInfo([1, 2]))).toThrow(/not a JSON object/);
    expect(() => read('sglang-native', 'GetServerInfo', msg(str(1, '{not json')))).toThrow();
    expect(() => read('sglang-native', 'GetServerInfo', msg())).toThrow(/without json_info/);
  });
});

describe("SMG's GetModelInfo and GetLoads", () => {
  it("GetModelInfo: the served name (6), else model_path (1), and the context (3); the simulated engine's extensions (100-103) are not read", () => {
    const answer = msg(str(1, '/models/llama'), num(3, 4096), str(6, 'llama'), num(100, 2048), num(101, 32), num(102, 64), num(103, 8192));
    expect(read('vllm', 'GetModelInfo', answer)).toEqual({ model: 'llama', maxModelLen: 4096 });
    expect(read('sglang', 'GetModelInfo', msg(str(1, '/models/qwen')))).toEqual({ model: '/models/qwen' });
  });

  it('GetLoads: max_running_requests (11) summed over the ranks that report one, and the rank count (3)', () => {
    const rank = (r: number, max: number): number[] => bytes(4, [...(r ? num(1, r) : []), ...num(2, 1), ...(max ? num(11, max) : [])]);
    expect(read('vllm', 'GetLoads', msg(num(3, 2), rank(0, 64), rank(1, 64)))).toEqual({ maxRunningRequests: 128, dataParallelSize: 2 });
    expect(read('vllm', 'GetLoads', msg(num(3, 1), rank(0, 0)))).toEqual({ dataParallelSize: 1 });
  });
});

describe('the range check: every capacity value goes to accept under the engine field name', () => {
  it("vLLM's own GetServerInfo: each field as sent (a negative uint64 as the huge number it is), then max_num_seqs over the ranks", () => {
    const { accept, asked } = judge();
    const answer = msg(bytes(4, num(3, 2)), num(6, 16), num(7, -1), num(8, 2 ** 40), num(9, 4096));
    expect(read('vllm-native', 'Control/GetServerInfo', answer, accept)).toMatchObject({ maxRunningRequests: 2 ** 41, dataParallelSize: 2 });
    expect(asked).toEqual([
      ['dataParallelSize', 'data_parallel_size', 2],
      ['kvTotalBlocks', 'total_kv_blocks', 2 ** 64],
      ['maxRunningRequests', 'max_running_requests', 2 ** 40],
      ['kvBlockSize', 'kv_block_size', 16],
      ['maxRunningRequests', 'max_running_requests x data_parallel_size', 2 ** 41],
      ['maxNumBatchedTokens', 'max_batched_tokens', 4096],
    ]);
  });

  it("vLLM's own GetServerInfo: a refused dp size leaves the per-rank blocks and max_num_seqs unknown too; zeros are not asked about", () => {
    const { accept, asked } = judge(['data_parallel_size']);
    const answer = msg(bytes(4, num(3, 2 ** 13)), num(6, 0), num(7, 100), num(8, 2 ** 40));
    expect(read('vllm-native', 'Control/GetServerInfo', answer, accept)).toEqual({});
    expect(asked.map(([, field]) => field)).toEqual(['data_parallel_size', 'total_kv_blocks', 'max_running_requests']);
  });

  it("SMG's GetLoads: each rank's max_running_requests, their sum and dp_rank_count; a refused rank leaves the sum unknown", () => {
    const rank = (r: number, max: number): number[] => bytes(4, [...(r ? num(1, r) : []), ...num(11, max)]);
    const { accept, asked } = judge();
    expect(read('vllm', 'GetLoads', msg(num(3, 2), rank(0, 3), rank(1, 4)), accept)).toEqual({ maxRunningRequests: 7, dataParallelSize: 2 });
    expect(asked).toEqual([
      ['maxRunningRequests', 'max_running_requests', 3],
      ['maxRunningRequests', 'max_running_requests', 4],
      ['maxRunningRequests', 'max_running_requests summed over ranks', 7],
      ['dataParallelSize', 'dp_rank_count', 2],
    ]);
    expect(read('vllm', 'GetLoads', msg(num(3, -1), rank(0, 3), rank(1, -4)), (_fact, _field, value) => (value > 0 ? value : undefined))).toEqual({});
  });

  it("SGLang's own GetServerInfo: JSON numbers as sent; a refused page size leaves the blocks unknown", () => {
    const info = {
      page_size: 2 ** 31 - 1,
      max_total_num_tokens: 2 ** 63,
      max_running_requests: -1,
      max_prefill_tokens: 8192,
      dp_size: 4,
      enable_dp_attention: true,
    };
    const { accept, asked } = judge(['page_size']);
    expect(read('sglang-native', 'GetServerInfo', msg(str(1, JSON.stringify(info))), accept)).toEqual({
      maxRunningRequests: -1,
      maxNumBatchedTokens: 8192,
      dataParallelSize: 4,
    });
    expect(asked).toEqual([
      ['kvBlockSize', 'page_size', 2 ** 31 - 1],
      ['kvTotalBlocks', 'max_total_num_tokens', 2 ** 63],
      ['maxRunningRequests', 'max_running_requests', -1],
      ['maxNumBatchedTokens', 'max_prefill_tokens', 8192],
      ['dataParallelSize', 'dp_size', 4],
    ]);
  });
});
