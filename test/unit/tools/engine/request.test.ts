// Validation of a Generate request against the simulated engine's limits: where the prompt comes
// from, every refusal and its client-facing message, the max_tokens clamp at its boundaries, and
// the dp rank from the field or the x-data-parallel-rank metadata.
import { describe, expect, it } from 'vitest';
import type { GenerateRequestMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { tokenize } from '../../../../src/protocol/engine/simulated-tokenizer.js';
import { resolveEngineOptions } from '../../../../src/tools/engine/options.js';
import { DP_RANK_METADATA, InvalidRequestError, parseGenerateRequest } from '../../../../src/tools/engine/request.js';

// Context 100 tokens (10 blocks of 10), output at most 50.
const options = resolveEngineOptions({ numGpuBlocks: 10, blockSize: 10, maxOutputTokens: 50, vocabSize: 1000 });

const ids = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
const request = (over: Partial<GenerateRequestMessage> = {}): GenerateRequestMessage => ({
  request_id: 'r-1',
  tokenized: { input_ids: ids(10) },
  stream: true,
  ...over,
});

function refusal(parse: () => unknown): InvalidRequestError {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return error as InvalidRequestError;
  }
  throw new Error('accepted');
}

describe('InvalidRequestError', () => {
  it('is an Error with its own name and code', () => {
    const error = refusal(() => parseGenerateRequest(request({ tokenized: { input_ids: [] } }), options));
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('InvalidRequestError');
    expect(error.code).toBe('ERR_INVALID_REQUEST');
  });
});

describe('parseGenerateRequest prompt', () => {
  it('uses tokenized.input_ids as given, over text', () => {
    const parsed = parseGenerateRequest(request({ tokenized: { input_ids: [7, 8, 9] }, text: 'a b c d e' }), options);
    expect(parsed.promptIds).toEqual([7, 8, 9]);
  });

  it('tokenizes text with the simulated tokenizer and the engine vocabulary', () => {
    const parsed = parseGenerateRequest({ request_id: 'r', text: 'the quick  brown fox', stream: false }, options);
    expect(parsed.promptIds).toEqual(tokenize('the quick brown fox', 1000));
    expect(parsed.promptIds).toHaveLength(4);
  });

  it.each([
    ['no prompt at all', { tokenized: null }],
    ['empty input_ids', { tokenized: { input_ids: [] } }],
    ['tokenized without input_ids', { tokenized: { original_text: 'hi' } }],
    ['blank text', { tokenized: null, text: ' \t\n ' }],
  ])('refuses %s', (_what, over) => {
    expect(refusal(() => parseGenerateRequest(request(over), options)).message).toBe('prompt is empty: set tokenized.input_ids or a non-blank text');
  });

  it('passes the request id and the stream flag through', () => {
    expect(parseGenerateRequest(request({ request_id: 'abc', stream: false }), options)).toMatchObject({ requestId: 'abc', stream: false });
    expect(parseGenerateRequest(request({ stream: true }), options).stream).toBe(true);
  });
});

describe('parseGenerateRequest sampling params', () => {
  it('refuses n > 1, and takes n = 1 or unset', () => {
    expect(refusal(() => parseGenerateRequest(request({ sampling_params: { n: 2 } }), options)).message).toBe(
      'sampling_params.n = 2 is not supported: the simulated engine produces one sample',
    );
    expect(parseGenerateRequest(request({ sampling_params: { n: 1 } }), options).maxTokens).toBe(50);
    expect(parseGenerateRequest(request({ sampling_params: null }), options).maxTokens).toBe(50);
  });

  it('refuses max_tokens 0, and reads a null max_tokens as unset', () => {
    expect(refusal(() => parseGenerateRequest(request({ sampling_params: { max_tokens: 0 } }), options)).message).toBe(
      'sampling_params.max_tokens must be at least 1, got 0',
    );
    expect(parseGenerateRequest(request({ sampling_params: { max_tokens: null } }), options).maxTokens).toBe(50);
  });

  it('takes a prompt plus max_tokens of exactly the context, and refuses one token more with the sum', () => {
    expect(parseGenerateRequest(request({ tokenized: { input_ids: ids(60) }, sampling_params: { max_tokens: 40 } }), options).maxTokens).toBe(40);
    expect(refusal(() => parseGenerateRequest(request({ tokenized: { input_ids: ids(60) }, sampling_params: { max_tokens: 41 } }), options)).message).toBe(
      "this model's maximum context length is 100 tokens, but 60 prompt tokens + 41 max_tokens = 101 were requested",
    );
  });

  it('leaves one token of output to a prompt one short of the context, and refuses a prompt of the whole context', () => {
    expect(parseGenerateRequest(request({ tokenized: { input_ids: ids(99) } }), options).maxTokens).toBe(1);
    expect(refusal(() => parseGenerateRequest(request({ tokenized: { input_ids: ids(100) } }), options)).message).toBe(
      'prompt has 100 tokens but the maximum context length is 100 tokens, which leaves no room for output',
    );
  });

  it('clamps an unset or large max_tokens to --max-output-tokens, and keeps a smaller one', () => {
    expect(parseGenerateRequest(request(), options).maxTokens).toBe(50);
    expect(parseGenerateRequest(request({ sampling_params: { max_tokens: 80 } }), options).maxTokens).toBe(50);
    expect(parseGenerateRequest(request({ sampling_params: { max_tokens: 3 } }), options).maxTokens).toBe(3);
  });

  it('uses --max-model-len, when set, as the context instead of the whole KV cache', () => {
    const short = resolveEngineOptions({ numGpuBlocks: 10, blockSize: 10, maxModelLen: 20 });
    expect(parseGenerateRequest(request(), short).maxTokens).toBe(10);
    expect(refusal(() => parseGenerateRequest(request({ sampling_params: { max_tokens: 11 } }), short)).message).toMatch(
      /maximum context length is 20 tokens, but 10 prompt tokens \+ 11 max_tokens = 21/,
    );
  });

  it('checks the dp rank before the prompt, so a bad rank is what the client hears first', () => {
    const error = refusal(() => parseGenerateRequest(request({ tokenized: { input_ids: [] }, data_parallel_rank: 5 }), options));
    expect(error.message).toMatch(/^data_parallel_rank 5 is out of range/);
  });
});

describe('parseGenerateRequest dp rank', () => {
  const four = resolveEngineOptions({ dataParallelSize: 4 });

  it('names the metadata key vLLM uses', () => {
    expect(DP_RANK_METADATA).toBe('x-data-parallel-rank');
  });

  it('takes the last rank and refuses a fractional one', () => {
    expect(parseGenerateRequest(request({ data_parallel_rank: 3 }), four).rank).toBe(3);
    expect(refusal(() => parseGenerateRequest(request({ data_parallel_rank: 1.5 }), four)).message).toBe(
      'data_parallel_rank 1.5 is out of range [0, 4) (data parallel size 4)',
    );
  });

  it('reads the metadata with surrounding spaces, and refuses more than nine digits or a sign', () => {
    expect(parseGenerateRequest(request(), four, ' 3\t').rank).toBe(3);
    expect(parseGenerateRequest(request(), four, '000000002').rank).toBe(2);
    for (const value of ['0000000002', '+1', '4', ' ']) {
      expect(refusal(() => parseGenerateRequest(request(), four, value)).message, value).toBe(
        `x-data-parallel-rank ${JSON.stringify(value)} is not an integer in [0, 4) (data parallel size 4)`,
      );
    }
  });

  it('ignores bad metadata when the field names the rank', () => {
    expect(parseGenerateRequest(request({ data_parallel_rank: 2 }), four, 'junk').rank).toBe(2);
  });
});
