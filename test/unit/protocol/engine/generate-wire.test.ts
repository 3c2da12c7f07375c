import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import {
  decodeGenerateRequest,
  decodeGenerateResponse,
  estimateTextTokens,
  generateFlavorForPath,
  GenerateWireDecoder,
} from '../../../../src/protocol/engine/generate-wire.js';

// Subsets of the engines' protos, written for this test: only the shapes the decoder relies on,
// plus unrelated fields around them so skipping is exercised.
const root = protobuf.parse(`
syntax = "proto3";
package t;
message TokenizedInput { string original_text = 1; repeated uint32 input_ids = 2; }
message TokenizedInputUnpacked { string original_text = 1; repeated uint32 input_ids = 2 [packed = false]; }
message SamplingParams { float temperature = 1; repeated string stop = 9; optional uint32 max_tokens = 8; uint32 n = 15; }
message VllmRequest { string request_id = 1; oneof input { TokenizedInput tokenized = 2; string text = 3; } SamplingParams sampling_params = 4; bool stream = 5; }
message VllmRequestUnpacked { string request_id = 1; TokenizedInputUnpacked tokenized = 2; SamplingParams sampling_params = 4; }
message MultimodalInputs { repeated string image_urls = 1; }
message SglangSampling { float temperature = 1; optional int32 max_new_tokens = 8; }
message SglangRequest { string request_id = 1; TokenizedInput tokenized = 2; MultimodalInputs mm_inputs = 3; SglangSampling sampling_params = 4; int32 data_parallel_rank = 16; }
message Chunk { repeated uint32 token_ids = 1; uint32 prompt_tokens = 2; uint32 completion_tokens = 3; uint32 cached_tokens = 4; }
message Complete { repeated uint32 output_ids = 1; string finish_reason = 2; uint32 prompt_tokens = 3; uint32 completion_tokens = 4; }
message Error { string message = 1; string http_status_code = 2; }
message Response { string request_id = 1; oneof response { Chunk chunk = 2; Complete complete = 3; Error error = 4; } }
`).root;

const enc = (type: string, value: object): Uint8Array => {
  const t = root.lookupType(`t.${type}`);
  return t.encode(t.fromObject(value)).finish();
};

const ids = (n: number, start = 1): number[] => Array.from({ length: n }, (_, i) => start + i * 1000);

describe('decodeGenerateRequest', () => {
  it('counts packed input_ids and reads max_tokens (vLLM)', () => {
    const bytes = enc('VllmRequest', {
      requestId: 'r1',
      tokenized: { originalText: 'hi', inputIds: ids(37) },
      samplingParams: { temperature: 0.5, stop: ['x'], maxTokens: 128, n: 1 },
      stream: true,
    });
    expect(decodeGenerateRequest(bytes, 'vllm')).toEqual({ promptTokens: 37, maxTokens: 128, promptEstimated: false });
  });

  it('counts unpacked input_ids the same', () => {
    const bytes = enc('VllmRequestUnpacked', { requestId: 'r1', tokenized: { inputIds: ids(5, 300000) }, samplingParams: { maxTokens: 9 } });
    expect(decodeGenerateRequest(bytes, 'vllm')).toEqual({ promptTokens: 5, maxTokens: 9, promptEstimated: false });
  });

  it('estimates a text prompt by words and leaves maxTokens out when unset', () => {
    const bytes = enc('VllmRequest', { requestId: 'r', text: '  The quick\tbrown\n fox  ', samplingParams: { temperature: 1 } });
    expect(decodeGenerateRequest(bytes, 'vllm')).toEqual({ promptTokens: 4, promptEstimated: true });
    expect(decodeGenerateRequest(bytes, 'vllm', (t) => t.length)?.promptTokens).toBe(24);
  });

  it('reads SGLang max_new_tokens and does not mistake mm_inputs for text', () => {
    const bytes = enc('SglangRequest', {
      requestId: 's',
      tokenized: { inputIds: ids(3) },
      mmInputs: { imageUrls: ['a b c d e'] },
      samplingParams: { maxNewTokens: 64 },
      dataParallelRank: 1,
    });
    expect(decodeGenerateRequest(bytes, 'sglang')).toEqual({ promptTokens: 3, maxTokens: 64, promptEstimated: false });
  });

  it('returns undefined for a request without a prompt, truncated bytes or garbage', () => {
    const good = enc('VllmRequest', { requestId: 'r', tokenized: { inputIds: ids(10) }, samplingParams: { maxTokens: 5 } });
    expect(decodeGenerateRequest(enc('VllmRequest', { requestId: 'r' }), 'vllm')).toBeUndefined();
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

describe('decodeGenerateResponse', () => {
  it('counts chunk token_ids as a delta and surfaces cumulative completion_tokens', () => {
    expect(decodeGenerateResponse(enc('Response', { requestId: 'r', chunk: { tokenIds: ids(3) } }))).toEqual({ kind: 'chunk', tokens: 3 });
    expect(
      decodeGenerateResponse(enc('Response', { requestId: 'r', chunk: { tokenIds: ids(2), promptTokens: 7, completionTokens: 12, cachedTokens: 1 } })),
    ).toEqual({ kind: 'chunk', tokens: 2, completionTokens: 12 });
  });

  it('reads complete output_ids and completion_tokens from their own field numbers', () => {
    expect(
      decodeGenerateResponse(
        enc('Response', { requestId: 'r', complete: { outputIds: ids(20), finishReason: 'length', promptTokens: 3, completionTokens: 20 } }),
      ),
    ).toEqual({ kind: 'complete', tokens: 20, completionTokens: 20 });
  });

  it('recognises errors and messages without a known body', () => {
    expect(decodeGenerateResponse(enc('Response', { requestId: 'r', error: { message: 'bad', httpStatusCode: '400' } }))).toEqual({ kind: 'error', tokens: 0 });
    expect(decodeGenerateResponse(enc('Response', { requestId: 'r' }))).toEqual({ kind: 'unknown', tokens: 0 });
  });

  it('returns undefined for malformed bytes and the decoder counts them', () => {
    const d = new GenerateWireDecoder('vllm');
    const good = enc('Response', { requestId: 'r', chunk: { tokenIds: ids(4) } });
    expect(d.response(good)).toEqual({ kind: 'chunk', tokens: 4 });
    expect(d.response(good.subarray(0, good.length - 1))).toBeUndefined();
    expect(d.response(Uint8Array.from([0x12, 0x03, 0x0a, 0x02, 0x80]))).toBeUndefined(); // truncated varint in packed ids
    expect(d.request(Uint8Array.from([0xff]))).toBeUndefined();
    expect(d.stats).toEqual({ requests: 0, responses: 1, malformed: 3 });
  });
});

describe('helpers', () => {
  it('maps only the two Generate paths to a flavor', () => {
    expect(generateFlavorForPath('/vllm.grpc.engine.VllmEngine/Generate')).toBe('vllm');
    expect(generateFlavorForPath('/sglang.grpc.scheduler.SglangScheduler/Generate')).toBe('sglang');
    expect(generateFlavorForPath('/vllm.grpc.engine.VllmEngine/HealthCheck')).toBeUndefined();
    expect(generateFlavorForPath('toString')).toBeUndefined();
  });

  it('estimates words for text prompts', () => {
    expect(estimateTextTokens('')).toBe(0);
    expect(estimateTextTokens(' one  two\nthree ')).toBe(3);
  });
});
