// Every message here is written byte by byte from the field numbers of the upstream protos
// (SMG's vllm_engine.proto and sglang_scheduler.proto, and the pre-2026 vLLM layout), never
// produced by this project's .proto files, so the decoder is checked against the wire facts
// themselves (docs/wire-facts.md, "Generate layouts").
import { describe, expect, it } from 'vitest';
import { bytes, float, msg, num, packed, str, tokenIds, unpacked } from '../../../support/proto-bytes.js';
import { decodeGenerateRequest, decodeGenerateResponse, enginePath, estimateTextTokens } from '../../../../src/protocol/engine/generate-wire.js';

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
    expect(decodeGenerateResponse(msg(bytes(1, chunkBody(ids(3)))), 'vllm')).toEqual({ kind: 'chunk', tokens: 3 });
    // completion_tokens is the chunk's own count in today's vLLM (DELTA output): never a running total.
    expect(decodeGenerateResponse(msg(bytes(1, chunkBody(ids(2), 2))), 'vllm')).toEqual({ kind: 'chunk', tokens: 2 });
    expect(decodeGenerateResponse(msg(bytes(2, completeBody(ids(20), 20))), 'vllm')).toEqual({ kind: 'complete', tokens: 20 });
  });

  it('vLLM legacy: request_id 1, chunk 2, complete 3, error 4', () => {
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(2, chunkBody(ids(3)))), 'vllm-legacy')).toEqual({ kind: 'chunk', tokens: 3 });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(3, completeBody(ids(20), 20))), 'vllm-legacy')).toEqual({
      kind: 'complete',
      tokens: 20,
      completionTokens: 20,
    });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(4, [...str(1, 'bad'), ...str(2, '400')])), 'vllm-legacy')).toEqual({ kind: 'error', tokens: 0 });
  });

  it('SGLang: request_id 1, chunk 2, complete 3; field 4 is reserved, not an error', () => {
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(2, chunkBody(ids(4), 9))), 'sglang')).toEqual({ kind: 'chunk', tokens: 4, completionTokens: 9 });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(3, completeBody(ids(5), 5))), 'sglang')).toEqual({ kind: 'complete', tokens: 5, completionTokens: 5 });
    expect(decodeGenerateResponse(msg(str(1, 'r'), bytes(4, str(1, 'x'))), 'sglang')).toEqual({ kind: 'unknown', tokens: 0 });
  });

  it('the layouts are not interchangeable: reading one with another miscounts, which is why the layout is configured', () => {
    const current = msg(bytes(2, completeBody(ids(20), 20))); // current vLLM complete
    expect(decodeGenerateResponse(current, 'vllm-legacy')).toEqual({ kind: 'chunk', tokens: 20, completionTokens: 3 }); // prompt_tokens read as completion_tokens
    const legacy = msg(str(1, 'abc'), bytes(2, chunkBody(ids(3)))); // legacy chunk: field 1 is a string
    expect(decodeGenerateResponse(legacy, 'vllm')?.kind).not.toBe('chunk');
  });

  it('recognises messages without a known body and rejects malformed bytes', () => {
    expect(decodeGenerateResponse(msg(), 'vllm')).toEqual({ kind: 'unknown', tokens: 0 });
    const good = msg(bytes(1, chunkBody(ids(4))));
    expect(decodeGenerateResponse(good.subarray(0, good.length - 1), 'vllm')).toBeUndefined();
    expect(decodeGenerateResponse(Uint8Array.from([0x0a, 0x03, 0x0a, 0x02, 0x80]), 'vllm')).toBeUndefined(); // truncated varint in packed ids
    expect(decodeGenerateResponse(Uint8Array.from([0xff]), 'vllm')).toBeUndefined();
  });
});

describe('helpers', () => {
  it('names each layout service', () => {
    expect(enginePath('vllm', 'Generate')).toBe('/vllm.grpc.engine.VllmEngine/Generate');
    expect(enginePath('vllm-legacy', 'Generate')).toBe('/vllm.grpc.engine.VllmEngine/Generate');
    expect(enginePath('sglang', 'GetLoads')).toBe('/sglang.grpc.scheduler.SglangScheduler/GetLoads');
  });

  it('estimates words for text prompts', () => {
    expect(estimateTextTokens('')).toBe(0);
    expect(estimateTextTokens(' one  two\nthree ')).toBe(3);
  });
});
