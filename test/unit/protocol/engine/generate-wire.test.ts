// Every message here is written byte by byte from the field numbers of the upstream protos
// (SMG's vllm_engine.proto and sglang_scheduler.proto, the pre-2026 vLLM layout, vLLM's own
// inference.proto at 1f9444a3 and SGLang's own runtime/v1/sglang.proto), never
// produced by this project's .proto files, so the decoder is checked against the wire facts
// themselves (docs/wire-facts.md, "Generate layouts").
import { describe, expect, it } from 'vitest';
import { bytes, float, msg, num, packed, str, tokenIds, unpacked } from '../../../support/proto-bytes.js';
import { ENGINE_PATHS, decodeGenerateRequest, decodeGenerateResponse, estimateTextTokens } from '../../../../src/protocol/engine/generate-wire.js';

const ids = tokenIds;

describe('decodeGenerateRequest', () => {
  it('vLLM: counts packed input_ids, reads max_tokens (8 in sampling_params 4) and data_parallel_rank 9', () => {
    const request = msg(
      str(1, 'req-1'),
      bytes(2, [...str(1, 'hi'), ...packed(2, ids(37))]),
      bytes(4, [...float(1, 0.5), ...str(10, 'x'), ...num(8, 128), ...num(15, 1)]),
      num(5, 1),
      num(9, 1),
    );
    expect(decodeGenerateRequest(request, 'vllm')).toEqual({ promptTokens: 37, maxTokens: 128, promptEstimated: false, dataParallelRank: 1 });
  });

  it('vLLM: a rank of 0 set explicitly is a pin (proto3 optional), a negative one is not', () => {
    const prompt = bytes(2, packed(2, ids(3)));
    expect(decodeGenerateRequest(msg(prompt, num(9, 0)), 'vllm')?.dataParallelRank).toBe(0);
    expect(decodeGenerateRequest(msg(prompt, num(9, -1)), 'vllm')).toEqual({ promptTokens: 3, promptEstimated: false });
    expect(decodeGenerateRequest(msg(prompt), 'vllm')).toEqual({ promptTokens: 3, promptEstimated: false });
  });

  it('counts unpacked input_ids the same', () => {
    const request = msg(str(1, 'r'), bytes(2, unpacked(2, ids(5, 300000))), bytes(4, num(8, 9)));
    expect(decodeGenerateRequest(request, 'vllm')).toEqual({ promptTokens: 5, maxTokens: 9, promptEstimated: false });
  });

  it('estimates a text prompt (field 3) by words and leaves maxTokens out when unset', () => {
    const request = msg(str(1, 'r'), str(3, '  The quick\tbrown\n fox  '), bytes(4, float(1, 1)));
    expect(decodeGenerateRequest(request, 'vllm')).toEqual({ promptTokens: 4, promptEstimated: true });
    expect(decodeGenerateRequest(request, 'vllm-legacy')).toEqual({ promptTokens: 4, promptEstimated: true });
    expect(decodeGenerateRequest(request, 'vllm', (t) => t.length)?.promptTokens).toBe(24);
  });

  it('SGLang: reads max_new_tokens, data_parallel_rank 16, and does not take mm_inputs (3) for text', () => {
    const request = msg(
      str(1, 's'),
      bytes(2, packed(2, ids(3))),
      bytes(3, str(1, 'a b c d e')),
      bytes(4, [...float(1, 0.7), ...num(8, 64)]),
      num(16, 1),
      num(17, 1),
    );
    expect(decodeGenerateRequest(request, 'sglang')).toEqual({ promptTokens: 3, maxTokens: 64, promptEstimated: false, dataParallelRank: 1 });
    // SGLang's rank has no presence: 0 is never on the wire and -1 means "scheduler picks".
    expect(decodeGenerateRequest(msg(bytes(2, packed(2, ids(3))), num(16, -1)), 'sglang')?.dataParallelRank).toBeUndefined();
    // Field 9 is return_hidden_states (a bool) in SGLang, not a rank.
    expect(decodeGenerateRequest(msg(bytes(2, packed(2, ids(3))), num(9, 1)), 'sglang')?.dataParallelRank).toBeUndefined();
  });

  it("vLLM's own (vllm.Inference): token_ids 4 {ids 1}, max_new_tokens 1 in stopping 8 (0 = unset), priority 12 skipped, no rank field", () => {
    const request = msg(
      str(1, 'req-1'),
      str(2, 'model'),
      bytes(4, packed(1, ids(21))),
      float(5, 0.7),
      bytes(8, [...num(1, 48), ...num(2, 1)]),
      bytes(9, num(5, 1)),
      num(12, 3),
    );
    expect(decodeGenerateRequest(request, 'vllm-native')).toEqual({ promptTokens: 21, maxTokens: 48, promptEstimated: false });
    expect(decodeGenerateRequest(msg(bytes(4, packed(1, ids(2))), bytes(8, num(1, 0))), 'vllm-native')).toEqual({ promptTokens: 2, promptEstimated: false });
    expect(decodeGenerateRequest(msg(str(3, 'one two three')), 'vllm-native')).toEqual({ promptTokens: 3, promptEstimated: true });
    // Field 9 is the response options there, never a rank; the rank travels as metadata.
    expect(decodeGenerateRequest(msg(bytes(4, packed(1, ids(2))), num(9, 1)), 'vllm-native')).toEqual({ promptTokens: 2, promptEstimated: false });
  });

  it("SGLang's own (runtime.v1): input_ids 1 packed or not, max_new_tokens 8 in sampling_params 2, routed_dp_rank 10 with presence", () => {
    const request = msg(packed(1, ids(9)), bytes(2, [...float(1, 0.5), ...num(8, 32)]), num(3, 1), str(7, 'rid'), num(10, 1), str(12, 'session'));
    expect(decodeGenerateRequest(request, 'sglang-native')).toEqual({ promptTokens: 9, maxTokens: 32, promptEstimated: false, dataParallelRank: 1 });
    expect(decodeGenerateRequest(msg(unpacked(1, ids(4)), num(10, 0)), 'sglang-native')).toEqual({
      promptTokens: 4,
      promptEstimated: false,
      dataParallelRank: 0,
    });
    expect(decodeGenerateRequest(msg(packed(1, ids(4)), num(10, -1)), 'sglang-native')).toEqual({ promptTokens: 4, promptEstimated: false });
    expect(decodeGenerateRequest(msg(str(7, 'rid')), 'sglang-native')).toBeUndefined();
  });

  it('returns undefined for a request without a prompt, truncated bytes or garbage', () => {
    const good = msg(str(1, 'r'), bytes(2, packed(2, ids(10))), bytes(4, num(8, 5)));
    expect(decodeGenerateRequest(msg(str(1, 'r')), 'vllm')).toBeUndefined();
    for (let cut = 1; cut < good.length; cut++) {
      const r = decodeGenerateRequest(good.subarray(0, cut), 'vllm');
      if (r) expect(r.promptTokens).toBeLessThanOrEqual(10); // a cut on a field boundary is a valid shorter message
    }
    expect(decodeGenerateRequest(good.subarray(0, good.length - 3), 'vllm')).toBeUndefined();
    expect(decodeGenerateRequest(Uint8Array.from([0x00, 0x01]), 'vllm')).toBeUndefined();
    expect(decodeGenerateRequest(Uint8Array.from([0x0f, 0xff, 0xff]), 'vllm')).toBeUndefined();
    expect(decodeGenerateRequest(Buffer.from('{"prompt":"json, not protobuf"}'), 'vllm')).toBeUndefined();
  });
});

// A chunk body: token_ids 1, prompt_tokens 2, completion_tokens 3, cached_tokens 4.
const chunkBody = (tokenIds: number[], completion?: number): number[] => [
  ...packed(1, tokenIds),
  ...num(2, 7),
  ...(completion ? num(3, completion) : []),
  ...num(4, 1),
];
// A complete body: output_ids 1, finish_reason 2, prompt_tokens 3, completion_tokens 4.
const completeBody = (outputIds: number[], completion: number): number[] => [...packed(1, outputIds), ...str(2, 'length'), ...num(3, 3), ...num(4, completion)];

describe('decodeGenerateResponse', () => {
  it('vLLM (current): chunk is field 1, complete field 2, and there is no request_id', () => {
    expect(decodeGenerateResponse(msg(bytes(1, chunkBody(ids(3)))), 'vllm')).toEqual({ kind: 'chunk', tokens: 3, cumulative: false });
    // completion_tokens is the chunk's own count in today's vLLM (DELTA output): never a running total.
    expect(decodeGenerateResponse(msg(bytes(1, chunkBody(ids(2), 2))), 'vllm')).toEqual({ kind: 'chunk', tokens: 2, cumulative: false });
    expect(decodeGenerateResponse(msg(bytes(2, completeBody(ids(20), 20))), 'vllm')).toEqual({ kind: 'complete', tokens: 20, cumulative: true });
  });

  it('vLLM legacy: request_id 1, chunk 2, complete 3, error 4', () => {
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(2, chunkBody(ids(3)))), 'vllm-legacy')).toEqual({ kind: 'chunk', tokens: 3, cumulative: false });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(3, completeBody(ids(20), 20))), 'vllm-legacy')).toEqual({
      kind: 'complete',
      tokens: 20,
      cumulative: true,
      completionTokens: 20,
    });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(4, [...str(1, 'bad'), ...str(2, '400')])), 'vllm-legacy')).toEqual({
      kind: 'error',
      tokens: 0,
      cumulative: false,
    });
  });

  it('SGLang: request_id 1, chunk 2, complete 3; field 4 is reserved, not an error', () => {
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(2, chunkBody(ids(4), 9))), 'sglang')).toEqual({
      kind: 'chunk',
      tokens: 4,
      cumulative: false,
      completionTokens: 9,
    });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(3, completeBody(ids(5), 5))), 'sglang')).toEqual({
      kind: 'complete',
      tokens: 5,
      cumulative: true,
      completionTokens: 5,
    });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(4, str(1, 'x'))), 'sglang')).toEqual({ kind: 'unknown', tokens: 0, cumulative: false });
  });

  it("vLLM's own: prompt_info alone is no output; outputs 2 counts num_tokens 3 (token_ids 4 only on request); finish_info 8 carries the running total", () => {
    expect(decodeGenerateResponse(msg(bytes(1, [...num(1, 40)])), 'vllm-native')).toEqual({ kind: 'unknown', tokens: 0, cumulative: false });
    expect(decodeGenerateResponse(msg(bytes(2, [...str(2, 'ab'), ...num(3, 2), ...packed(4, ids(2))])), 'vllm-native')).toEqual({
      kind: 'chunk',
      tokens: 2,
      cumulative: false,
    });
    // output_token_ids false: num_tokens alone still counts.
    expect(decodeGenerateResponse(msg(bytes(2, [...str(2, 'abc'), ...num(3, 3)])), 'vllm-native')).toEqual({ kind: 'chunk', tokens: 3, cumulative: false });
    const last = msg(bytes(2, [...num(3, 1), ...packed(4, ids(1)), ...bytes(8, [...num(1, 64), ...num(2, 1)])]));
    expect(decodeGenerateResponse(last, 'vllm-native')).toEqual({ kind: 'complete', tokens: 1, cumulative: false, completionTokens: 64 });
  });

  it("SGLang's own: output_ids 1 are new ids or all ids so far, as the engine says; finished 3 ends; meta_info 2 is skipped", () => {
    const meta = bytes(2, [...str(1, 'completion_tokens'), ...str(2, '5')]);
    const chunkMsg = msg(packed(1, ids(5)), meta);
    expect(decodeGenerateResponse(chunkMsg, 'sglang-native')).toEqual({ kind: 'chunk', tokens: 5, cumulative: false });
    expect(decodeGenerateResponse(chunkMsg, 'sglang-native', { cumulativeOutputIds: true })).toEqual({ kind: 'chunk', tokens: 5, cumulative: true });
    expect(decodeGenerateResponse(msg(packed(1, ids(2)), meta, num(3, 1)), 'sglang-native')).toEqual({ kind: 'complete', tokens: 2, cumulative: false });
  });

  it('the layouts are not interchangeable: reading one with another miscounts, which is why the layout is configured', () => {
    const current = msg(bytes(2, completeBody(ids(20), 20))); // current vLLM complete
    expect(decodeGenerateResponse(current, 'vllm-legacy')).toEqual({ kind: 'chunk', tokens: 20, cumulative: false, completionTokens: 3 }); // prompt_tokens read as completion_tokens
    const legacy = msg(str(1, 'abc'), bytes(2, chunkBody(ids(3)))); // legacy chunk: field 1 is a string
    expect(decodeGenerateResponse(legacy, 'vllm')?.kind).not.toBe('chunk');
  });

  it('recognises messages without a known body and rejects malformed bytes', () => {
    expect(decodeGenerateResponse(msg(), 'vllm')).toEqual({ kind: 'unknown', tokens: 0, cumulative: false });
    const good = msg(bytes(1, chunkBody(ids(4))));
    expect(decodeGenerateResponse(good.subarray(0, good.length - 1), 'vllm')).toBeUndefined();
    expect(decodeGenerateResponse(Uint8Array.from([0x0a, 0x03, 0x0a, 0x02, 0x80]), 'vllm')).toBeUndefined(); // truncated varint in packed ids
    expect(decodeGenerateResponse(Uint8Array.from([0xff]), 'vllm')).toBeUndefined();
  });
});

describe('helpers', () => {
  it("names each protocol's RPCs", () => {
    expect(ENGINE_PATHS['vllm'].generate).toEqual(['/vllm.grpc.engine.VllmEngine/Generate']);
    expect(ENGINE_PATHS['vllm-legacy'].generate).toEqual(['/vllm.grpc.engine.VllmEngine/Generate']);
    expect(ENGINE_PATHS['sglang'].loads).toBe('/sglang.grpc.scheduler.SglangScheduler/GetLoads');
    expect(ENGINE_PATHS['vllm-native']).toEqual({
      generate: ['/vllm.Inference/Generate', '/vllm.Inference/GenerateStream'],
      modelInfo: '/vllm.Control/GetModelInfo',
      serverInfo: '/vllm.Control/GetServerInfo',
      loads: undefined,
    });
    expect(ENGINE_PATHS['sglang-native'].loads).toBe('/sglang.runtime.v1.SglangService/GetLoad');
  });

  it('estimates words for text prompts', () => {
    expect(estimateTextTokens('')).toBe(0);
    expect(estimateTextTokens(' one  two\nthree ')).toBe(3);
  });
});
