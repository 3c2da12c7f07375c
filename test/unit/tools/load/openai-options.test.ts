// Options of the --openai load mode: one of --target / --openai, the URL forms, the flags that
// only make sense over HTTP, overload statuses and --retry-max-ms; every problem named at once.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { HTTP_OVERLOADED, openAiBaseUrl, resolveLoadOptions, type LoadOptions } from '../../../../src/tools/load/options.js';
import { loadSettingsFromCli, type LoadCliValues } from '../../../../src/tools/load/cli-options.js';
import { promptText } from '../../../../src/tools/load/openai-transport.js';
import { mulberry32 } from '../../../../src/platform/prng.js';

/** The options alone, as most tests here need them. */
const loadOptionsFromCli = (values: LoadCliValues): LoadOptions => loadSettingsFromCli(values).options;

function flagsOf(values: LoadCliValues): string[] {
  try {
    loadOptionsFromCli(values);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).errors.map((e) => e.flag).sort();
  }
  throw new Error(`accepted ${JSON.stringify(values)}`);
}

describe('--openai options', () => {
  it('normalises the base URL to end in /v1, whatever form it was given in', () => {
    for (const given of ['http://127.0.0.1:8000', 'http://127.0.0.1:8000/', 'http://127.0.0.1:8000/v1', ' http://127.0.0.1:8000/v1/ ']) {
      expect(openAiBaseUrl(given), given).toBe('http://127.0.0.1:8000/v1');
    }
    expect(openAiBaseUrl('https://gw.example/llm')).toBe('https://gw.example/llm/v1');
    expect(openAiBaseUrl('127.0.0.1:8000')).toMatchObject({ problem: expect.stringMatching(/http/) });
    expect(openAiBaseUrl('ftp://h/')).toMatchObject({ problem: expect.stringMatching(/http/) });
    expect(openAiBaseUrl('http://h/v1?x=1')).toMatchObject({ problem: expect.stringMatching(/query/) });
  });

  it('resolves with defaults: chat, streaming, 529 only, model from the server', () => {
    const o = loadOptionsFromCli({ openai: 'http://127.0.0.1:8000' });
    expect(o).toMatchObject({
      openai: 'http://127.0.0.1:8000/v1',
      target: undefined,
      model: undefined,
      api: 'chat',
      stream: true,
      overloadStatuses: [529],
      concurrency: 1,
      durationS: 10,
    });
    expect(Object.isFrozen(o)).toBe(true);
  });

  it('adds --overload-status codes to 529, repeated or comma-separated', () => {
    expect(loadOptionsFromCli({ openai: 'http://h:1', overloadStatus: ['503', '429,503'] }).overloadStatuses).toEqual([HTTP_OVERLOADED, 503, 429]);
    expect(loadOptionsFromCli({ openai: 'http://h:1', overloadStatus: '503' }).overloadStatuses).toEqual([529, 503]);
  });

  it('requires exactly one of --target and --openai', () => {
    expect(() => loadOptionsFromCli({})).toThrow(/--target: is required .*or --openai URL/);
    expect(() => loadOptionsFromCli({ target: '127.0.0.1:1', openai: 'http://127.0.0.1:8000' })).toThrow(/--openai: cannot be combined with --target/);
  });

  it('resolves resolved options to the same options (runLoad resolves what the CLI resolved)', () => {
    for (const values of [{ openai: 'http://h:1/v1', api: 'completions', overloadStatus: '503', model: 'm' }, { target: '127.0.0.1:1' }]) {
      const once = loadOptionsFromCli(values);
      expect(resolveLoadOptions(once)).toEqual(once);
    }
  });

  it('refuses HTTP-only flags in gRPC mode', () => {
    expect(flagsOf({ target: '127.0.0.1:1', model: 'm', api: 'chat', overloadStatus: '503' })).toEqual(['--api', '--model', '--overload-status']);
    expect(() => resolveLoadOptions({ target: '127.0.0.1:1', model: 'm' })).toThrow(/--model: applies only with --openai/);
  });

  it('names every bad flag at once, and never echoes credentials', () => {
    expect(flagsOf({ openai: 'localhost:8000', api: 'embeddings', overloadStatus: '5xx', retryMaxMs: '10', concurrency: '0' })).toEqual([
      '--api',
      '--concurrency',
      '--openai',
      '--overload-status',
      '--retry-max-ms',
    ]);
    expect(flagsOf({ openai: 'http://h:1', overloadStatus: '200' })).toEqual(['--overload-status']);
    expect(flagsOf({ openai: 'http://h:1', model: ' ' })).toEqual(['--model']);
    try {
      loadOptionsFromCli({ openai: 'http://user:sekrit@h:1' });
      throw new Error('accepted credentials');
    } catch (error) {
      expect((error as Error).message).toMatch(/--openai: must not contain credentials/);
      expect((error as Error).message).not.toContain('sekrit');
    }
  });

  it('takes --retry-max-ms in both modes, at least the first backoff', () => {
    expect(loadOptionsFromCli({ target: '127.0.0.1:1', retryMaxMs: '800' }).retryMaxMs).toBe(800);
    expect(() => loadOptionsFromCli({ openai: 'http://h:1', retryMaxMs: '49' })).toThrow(/--retry-max-ms: must be a number >= 50/);
  });
});

describe('prompt text', () => {
  it('has exactly N words, the same for the same seed and different for another', () => {
    const a = promptText(37, mulberry32(5));
    expect(a.split(/\s+/)).toHaveLength(37);
    expect(a).not.toMatch(/^\s|\s$|\s\s/);
    expect(promptText(37, mulberry32(5))).toBe(a);
    expect(promptText(37, mulberry32(6))).not.toBe(a);
  });
});
