// Engine option validation and Generate request validation, without a server.
import { describe, expect, it } from 'vitest';
import { DEFAULT_ENGINE_OPTIONS, engineOptionsFromCli, resolveEngineOptions } from '../../../../src/tools/engine/options.js';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { InvalidRequestError, parseGenerateRequest } from '../../../../src/tools/engine/request.js';
import { tokenize } from '../../../../src/protocol/engine/simulated-tokenizer.js';

describe('engine options', () => {
  it('returns frozen defaults', () => {
    const o = resolveEngineOptions();
    expect(o).toEqual(DEFAULT_ENGINE_OPTIONS);
    expect(Object.isFrozen(o)).toBe(true);
  });

  it('reports every bad flag by name', () => {
    try {
      engineOptionsFromCli({ numGpuBlocks: 'many', blockSize: '0', earlyStopProb: '1.5', port: '70000' });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).errors.map((e) => e.flag)).toEqual(['--num-gpu-blocks', '--block-size', '--early-stop-prob', '--port']);
      expect((error as Error).message).toContain("--num-gpu-blocks: must be an integer >= 1 and <= 100000000, got 'many'");
    }
  });

  it('refuses a max model length larger than the KV cache', () => {
    expect(() => resolveEngineOptions({ numGpuBlocks: 2, blockSize: 4, maxModelLen: 9 })).toThrow(/--max-model-len: must not exceed the KV cache/);
  });
});

describe('tokenizer', () => {
  it('gives one stable, non-zero id per whitespace-separated word', () => {
    const ids = tokenize('  hello big\tworld hello ', 1000);
    expect(ids).toHaveLength(4);
    expect(ids[0]).toBe(ids[3]);
    expect(ids.every((id) => id >= 1 && id < 1000)).toBe(true);
  });
});

describe('parseGenerateRequest', () => {
  const options = resolveEngineOptions({ numGpuBlocks: 10, blockSize: 10, maxOutputTokens: 50 });

  it('clamps max_tokens to --max-output-tokens and to the context left', () => {
    expect(parseGenerateRequest({ request_id: 'a', text: 'a b c', stream: true }, options).maxTokens).toBe(50);
    expect(parseGenerateRequest({ request_id: 'a', tokenized: { input_ids: new Array<number>(80).fill(1) }, stream: true }, options).maxTokens).toBe(20);
    expect(parseGenerateRequest({ request_id: 'a', text: 'x', sampling_params: { max_tokens: 7 }, stream: false }, options)).toMatchObject({
      maxTokens: 7,
      stream: false,
    });
  });

  it('throws InvalidRequestError for a prompt that fills the whole context', () => {
    expect(() => parseGenerateRequest({ request_id: 'a', tokenized: { input_ids: new Array<number>(100).fill(1) }, stream: true }, options)).toThrow(
      InvalidRequestError,
    );
  });

  describe('dp rank', () => {
    const two = resolveEngineOptions({ dataParallelSize: 2 });
    const base = { request_id: 'a', text: 'hi', stream: true };

    it('is data_parallel_rank when set, over the x-data-parallel-rank metadata', () => {
      expect(parseGenerateRequest({ ...base, data_parallel_rank: 1 }, two).rank).toBe(1);
      expect(parseGenerateRequest({ ...base, data_parallel_rank: 0 }, two, '1').rank).toBe(0);
    });

    it('is the x-data-parallel-rank metadata when the field is unset, else undefined (the engine picks)', () => {
      expect(parseGenerateRequest(base, two, '1').rank).toBe(1);
      expect(parseGenerateRequest({ ...base, data_parallel_rank: null }, two, ' 0 ').rank).toBe(0);
      expect(parseGenerateRequest(base, two).rank).toBeUndefined();
    });

    it.each([-1, 2, 7])('refuses data_parallel_rank %d outside [0, 2), naming the field', (rank) => {
      expect(() => parseGenerateRequest({ ...base, data_parallel_rank: rank }, two)).toThrow(
        new InvalidRequestError(`data_parallel_rank ${rank} is out of range [0, 2) (data parallel size 2)`),
      );
    });

    it.each(['2', '-1', 'one', '', '1.0'])('refuses x-data-parallel-rank %j, naming the metadata', (value) => {
      expect(() => parseGenerateRequest(base, two, value)).toThrow(/^x-data-parallel-rank ".*" is not an integer in \[0, 2\)/);
    });

    it('refuses rank 1 on a one-rank engine', () => {
      expect(() => parseGenerateRequest({ ...base, data_parallel_rank: 1 }, options)).toThrow(/data_parallel_rank 1 is out of range \[0, 1\)/);
    });
  });
});
