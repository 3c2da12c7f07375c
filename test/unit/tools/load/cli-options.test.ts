// The load command's strings: ranges, strict numbers, overload statuses, switches, and each bad
// value reported once under the flag or variable it came from. The option table itself (defaults,
// env twins) is in options.test.ts; the --openai flags in openai-options.test.ts.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import type { Env } from '../../../../src/platform/config/option-reader.js';
import { loadSettingsFromCli, parseIntRange, type LoadCliValues } from '../../../../src/tools/load/cli-options.js';
import type { LoadOptions } from '../../../../src/tools/load/options.js';

/** The options alone, as most tests here need them. */
const loadOptionsFromCli = (values: LoadCliValues, env?: Env): LoadOptions => loadSettingsFromCli(values, env).options;

const GRPC = { target: '127.0.0.1:1' };
const HTTP = { openai: 'http://127.0.0.1:8000' };

function refused(values: LoadCliValues, env: Env = {}): ConfigError {
  try {
    loadSettingsFromCli(values, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`accepted ${JSON.stringify(values)}`);
}

describe('parseIntRange', () => {
  it('allows spaces around the numbers and the dash', () => {
    expect(parseIntRange(' 64 - 256 ')).toEqual({ min: 64, max: 256 });
    expect(parseIntRange('\t7 ')).toEqual({ min: 7, max: 7 });
  });

  it('leaves MIN <= MAX to the resolver: a reversed range parses', () => {
    expect(parseIntRange('9-3')).toEqual({ min: 9, max: 3 });
  });

  it.each(['', ' ', '1.5', '3-', '-', '1-2-3', '1e3', '0x10', '+4', '4 5', '1..5'])('refuses %j', (text) => {
    expect(parseIntRange(text)).toBeUndefined();
  });
});

describe('loadSettingsFromCli length distribution', () => {
  it('reads --length-distribution over its variable, uniform by default, and names a bad one', () => {
    expect(loadOptionsFromCli(GRPC).lengthDistribution).toBe('uniform');
    expect(loadOptionsFromCli(GRPC, { DYN_LOAD_CLIENT_LENGTH_DISTRIBUTION: 'lognormal' }).lengthDistribution).toBe('lognormal');
    expect(() => loadOptionsFromCli({ ...GRPC, lengthDistribution: 'zipf' })).toThrow("--length-distribution: must be 'uniform' or 'lognormal'");
  });
});

describe('loadSettingsFromCli latency SLO', () => {
  it('reads --slo-ttft-ms and --slo-itl-ms over their variables, each optional', () => {
    expect(loadOptionsFromCli({ ...GRPC, sloTtftMs: '500' }, { DYN_LOAD_CLIENT_SLO_ITL_MS: '40' })).toMatchObject({ sloTtftMs: 500, sloItlMs: 40 });
    expect(loadOptionsFromCli(GRPC)).toMatchObject({ sloTtftMs: undefined, sloItlMs: undefined });
  });

  it('refuses a bound that is not a positive number, naming it', () => {
    expect(() => loadOptionsFromCli({ ...GRPC, sloTtftMs: '0' })).toThrow('--slo-ttft-ms: must be a number > 0');
    expect(() => loadOptionsFromCli(GRPC, { DYN_LOAD_CLIENT_SLO_ITL_MS: 'fast' })).toThrow("DYN_LOAD_CLIENT_SLO_ITL_MS: must be a number, got 'fast'");
  });
});

describe('loadSettingsFromCli numbers', () => {
  it('accepts what Number() reads in full, surrounding spaces included', () => {
    expect(loadOptionsFromCli({ ...GRPC, concurrency: ' 4 ', deadlineMs: '2.5e3', graceS: '0' })).toMatchObject({
      concurrency: 4,
      deadlineMs: 2500,
      graceS: 0,
    });
  });

  it.each([
    ['an empty value', ''],
    ['a blank value', '  '],
    ['trailing junk', '1e3abc'],
    ['a unit', '10s'],
  ])('refuses %s, quoting it', (_what, value) => {
    expect(refused({ ...GRPC, durationS: value }).problems).toEqual([`--duration-s: must be a number, got '${value}'`]);
  });

  it('reports an unparsable value once, not again as the missing value the resolver would see', () => {
    const error = refused({ ...GRPC, retry: 'x', seed: 'y', count: '' });
    expect(error.errors.map((e) => e.flag).sort()).toEqual(['--count', '--retry', '--seed']);
  });

  it('passes a parsed number on to the resolver, which names the flag for its range', () => {
    expect(refused({ ...GRPC, concurrency: '1.5' }).problems).toEqual(['--concurrency: must be an integer from 1 to 100000, got 1.5']);
    expect(refused({ ...GRPC, retry: '101' }).problems).toEqual(['--retry: must be an integer from 0 to 100, got 101']);
  });

  it('names the variable when the bad number came from the environment', () => {
    expect(refused(GRPC, { DYN_LOAD_CLIENT_COUNT: 'ten' }).problems).toEqual(["DYN_LOAD_CLIENT_COUNT: must be a number, got 'ten'"]);
    expect(refused(GRPC, { DYN_LOAD_CLIENT_COUNT: '0' }).problems).toEqual(['DYN_LOAD_CLIENT_COUNT: must be an integer >= 1, got 0']);
  });
});

describe('loadSettingsFromCli token ranges', () => {
  it('reads a fixed length or a range for both prompt and output', () => {
    expect(loadOptionsFromCli({ ...GRPC, promptTokens: '10-20', maxTokens: '5' })).toMatchObject({
      promptTokens: { min: 10, max: 20 },
      maxTokens: { min: 5, max: 5 },
    });
  });

  it('refuses a malformed one with the accepted forms, and a reversed or zero one by the resolver', () => {
    expect(refused({ ...GRPC, promptTokens: '10..20' }).problems).toEqual(["--prompt-tokens: must be an integer N or a range MIN-MAX, got '10..20'"]);
    expect(refused({ ...GRPC, maxTokens: '0' }).problems).toEqual([
      '--max-tokens: must be an integer >= 1 or a range MIN-MAX with MIN <= MAX, got {"min":0,"max":0}',
    ]);
    expect(refused({ ...GRPC, maxTokens: '8-4' }).errors.map((e) => e.flag)).toEqual(['--max-tokens']);
  });
});

describe('loadSettingsFromCli overload statuses', () => {
  it('takes the codes with spaces around them, from the flag or from the variable', () => {
    expect(loadOptionsFromCli({ ...HTTP, overloadStatus: ' 503 , 429' }).overloadStatuses).toEqual([529, 503, 429]);
    expect(loadOptionsFromCli(HTTP, { DYN_LOAD_CLIENT_OVERLOAD_STATUS: '503' }).overloadStatuses).toEqual([529, 503]);
  });

  it('keeps 529 once when it is given again', () => {
    expect(loadOptionsFromCli({ ...HTTP, overloadStatus: ['529', '503,529'] }).overloadStatuses).toEqual([529, 503]);
  });

  it.each(['', '5031', '50', '503,', 'abc'])('refuses %j once, quoting what was given', (value) => {
    const error = refused({ ...HTTP, overloadStatus: value });
    expect(error.problems).toEqual([`--overload-status: must be HTTP status codes such as 503 (comma-separated or repeated), got '${value}'`]);
  });

  it('quotes the repeated flags joined, as they were read', () => {
    expect(refused({ ...HTTP, overloadStatus: ['503', 'x'] }).problems[0]).toMatch(/got '503,x'$/);
  });
});

describe('loadSettingsFromCli modes', () => {
  it('refuses an HTTP-only setting in gRPC mode once, under the variable it came from', () => {
    const error = refused(GRPC, { DYN_LOAD_CLIENT_API: 'chat', DYN_LOAD_CLIENT_OVERLOAD_STATUS: 'junk' });
    expect(error.problems).toEqual(['DYN_LOAD_CLIENT_API: applies only with --openai', 'DYN_LOAD_CLIENT_OVERLOAD_STATUS: applies only with --openai']);
  });

  it('throws one ConfigError with the load code', () => {
    expect(refused({}).code).toBe('ERR_LOAD_CONFIG');
  });
});

describe('loadSettingsFromCli switches', () => {
  it('defaults to streaming, a table and live progress', () => {
    expect(loadSettingsFromCli(GRPC)).toMatchObject({ options: { stream: true }, json: false, quiet: false });
  });

  it('takes --json and --quiet as given by commander', () => {
    expect(loadSettingsFromCli({ ...GRPC, json: true, quiet: true })).toMatchObject({ json: true, quiet: true });
  });

  it("reads commander's stream=true (no --no-stream) as unset, so the variable still decides", () => {
    expect(loadSettingsFromCli({ ...GRPC, stream: true }, { DYN_LOAD_CLIENT_STREAM: 'off' }).options.stream).toBe(false);
    expect(loadSettingsFromCli({ ...GRPC, stream: false }, { DYN_LOAD_CLIENT_STREAM: 'on' }).options.stream).toBe(false);
  });

  it('refuses a switch variable that is no boolean word, and keeps its default', () => {
    expect(refused(GRPC, { DYN_LOAD_CLIENT_JSON: 'sometimes' }).problems).toEqual(["DYN_LOAD_CLIENT_JSON: must be true or false, got 'sometimes'"]);
    expect(refused(GRPC, { DYN_LOAD_CLIENT_STREAM: '2' }).problems).toEqual(["DYN_LOAD_CLIENT_STREAM: must be true or false, got '2'"]);
  });
});

describe('loadSettingsFromCli request class', () => {
  it('reads --priority (signed) and --tenant over their variables, in either mode, unset by default', () => {
    expect(loadOptionsFromCli({ ...GRPC, priority: '-5', tenant: 'acme' })).toMatchObject({ priority: -5, tenant: 'acme' });
    expect(loadOptionsFromCli(HTTP, { DYN_LOAD_CLIENT_PRIORITY: ' 2 ', DYN_LOAD_CLIENT_TENANT: 't1' })).toMatchObject({ priority: 2, tenant: 't1' });
    expect(loadOptionsFromCli(GRPC)).toMatchObject({ priority: undefined, tenant: undefined });
  });

  it('refuses a priority that is no int32 and a tenant that is no visible ASCII, naming where each came from', () => {
    for (const value of ['1.5', '2147483648', 'high', '1e3', ''])
      expect(refused({ ...GRPC, priority: value }).problems).toEqual([`--priority: must be an integer from -2147483648 to 2147483647, got '${value}'`]);
    expect(refused(GRPC, { DYN_LOAD_CLIENT_PRIORITY: '-2147483649' }).errors.map((e) => e.flag)).toEqual(['DYN_LOAD_CLIENT_PRIORITY']);
    expect(loadOptionsFromCli({ ...GRPC, priority: '+7' }).priority).toBe(7);
    expect(refused(GRPC, { DYN_LOAD_CLIENT_TENANT: 'a b' }).problems).toEqual([
      'DYN_LOAD_CLIENT_TENANT: must be visible ASCII characters (no spaces or control characters), got "a b"',
    ]);
    expect(refused({ ...GRPC, tenant: 'x'.repeat(257) }).problems[0]).toMatch(/^--tenant: must be at most 256 characters, got "x+"$/);
  });
});
