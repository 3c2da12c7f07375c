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
});
