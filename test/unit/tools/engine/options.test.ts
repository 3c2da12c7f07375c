/** The simulated engine's option table: defaults, env twins, and problems naming the flag or the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import {
  DEFAULT_ENGINE_OPTIONS,
  ENGINE_OPTIONS,
  engineOptionsFromCli,
  resolveEngineOptions,
  type EngineOptions,
} from '../../../../src/tools/engine/options.js';
import { expectShownDefaultParsed } from '../../../support/option-defaults.js';

const KEYS = Object.keys(ENGINE_OPTIONS) as (keyof EngineOptions)[];

function flagsOf(parse: () => unknown): string[] {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).errors.map((e) => e.flag);
  }
  throw new Error('accepted');
}

describe('engine option table', () => {
  it.each(KEYS)('%s: --help shows the default the parser gives when unset', (key) => {
    expectShownDefaultParsed(ENGINE_OPTIONS[key], engineOptionsFromCli({}, {})[key]);
  });

  it('is the library defaults too', () => {
    expect(resolveEngineOptions()).toEqual(engineOptionsFromCli({}, {}));
    expect(Object.keys(DEFAULT_ENGINE_OPTIONS).sort()).toEqual([...KEYS].sort());
  });

  it('gives every flag a DYN_SIM_ENGINE_ twin of its own', () => {
    for (const spec of Object.values(ENGINE_OPTIONS))
      expect(spec.env).toBe(
        `DYN_SIM_ENGINE_${spec.flag
          .replace(/^--| .*/g, '')
          .replaceAll('-', '_')
          .toUpperCase()}`,
      );
  });

  it('reads the env twins, and a flag wins over its twin', () => {
    const env = { DYN_SIM_ENGINE_NUM_GPU_BLOCKS: '64', DYN_SIM_ENGINE_MODEL_NAME: 'from-env', DYN_SIM_ENGINE_DECODE_STEP_MS: '2.5', DYN_SIM_ENGINE_SEED: '' };
    expect(engineOptionsFromCli({}, env)).toMatchObject({ numGpuBlocks: 64, modelName: 'from-env', decodeStepMs: 2.5, seed: 0 });
    expect(engineOptionsFromCli({ numGpuBlocks: '32', modelName: 'from-flag' }, env)).toMatchObject({
      numGpuBlocks: 32,
      modelName: 'from-flag',
      decodeStepMs: 2.5,
    });
  });

  it('names the variable a bad value came from, and every problem at once', () => {
    const env = { DYN_SIM_ENGINE_BLOCK_SIZE: 'x', DYN_SIM_ENGINE_EARLY_STOP_PROB: '2', DYN_SIM_ENGINE_PORT: '1' };
    expect(flagsOf(() => engineOptionsFromCli({ port: '70000' }, env))).toEqual(['DYN_SIM_ENGINE_BLOCK_SIZE', 'DYN_SIM_ENGINE_EARLY_STOP_PROB', '--port']);
    expect(() => engineOptionsFromCli({}, { DYN_SIM_ENGINE_BLOCK_SIZE: 'x' })).toThrow(
      "DYN_SIM_ENGINE_BLOCK_SIZE: must be an integer >= 1 and <= 65536, got 'x'",
    );
    expect(() => engineOptionsFromCli({}, { DYN_SIM_ENGINE_NUM_GPU_BLOCKS: '2', DYN_SIM_ENGINE_MAX_MODEL_LEN: '64' })).toThrow(
      /^DYN_SIM_ENGINE_MAX_MODEL_LEN: must not exceed the KV cache/,
    );
  });

  it('names the flag for library callers', () => {
    expect(flagsOf(() => resolveEngineOptions({ blockSize: 0, host: ' ' }))).toEqual(['--block-size', '--host']);
  });

  it('takes --data-parallel-size from 1 to 64, default 1, from the flag or DYN_SIM_ENGINE_DATA_PARALLEL_SIZE', () => {
    expect(engineOptionsFromCli({}, {}).dataParallelSize).toBe(1);
    expect(engineOptionsFromCli({ dataParallelSize: '64' }, {}).dataParallelSize).toBe(64);
    expect(engineOptionsFromCli({}, { DYN_SIM_ENGINE_DATA_PARALLEL_SIZE: '4' }).dataParallelSize).toBe(4);
    expect(engineOptionsFromCli({ dataParallelSize: '2' }, { DYN_SIM_ENGINE_DATA_PARALLEL_SIZE: '4' }).dataParallelSize).toBe(2);
    expect(resolveEngineOptions({ dataParallelSize: 3 }).dataParallelSize).toBe(3);
  });

  it.each(['0', '65', '1.5', '-1', 'two'])('refuses --data-parallel-size %j, naming the flag', (value) => {
    expect(() => engineOptionsFromCli({ dataParallelSize: value }, {})).toThrow(/^--data-parallel-size: must be an integer >= 1 and <= 64, got /);
  });

  it('names DYN_SIM_ENGINE_DATA_PARALLEL_SIZE for a bad env value, and the flag for a library caller', () => {
    expect(() => engineOptionsFromCli({}, { DYN_SIM_ENGINE_DATA_PARALLEL_SIZE: '0' })).toThrow(
      'DYN_SIM_ENGINE_DATA_PARALLEL_SIZE: must be an integer >= 1 and <= 64, got 0',
    );
    expect(flagsOf(() => resolveEngineOptions({ dataParallelSize: 0.5 }))).toEqual(['--data-parallel-size']);
  });
});

describe('engine presets, cost model and time scale options', () => {
  const PRESET = 'llama-3.3-70b-fp8-2xh100';

  it('defaults to no preset, the auto cost model and time scale 1: the fixed step of before', () => {
    expect(engineOptionsFromCli({}, {})).toMatchObject({ preset: 'none', costModel: 'auto', timeScale: 1, numGpuBlocks: 2048, maxNumSeqs: 256 });
  });

  it("takes a preset's vLLM limits for the ones not given, from the flag or DYN_SIM_ENGINE_PRESET", () => {
    const limits = { numGpuBlocks: 31_809, maxNumSeqs: 1024, maxNumBatchedTokens: 8192 };
    expect(engineOptionsFromCli({ preset: PRESET }, {})).toMatchObject({ preset: PRESET, ...limits });
    expect(engineOptionsFromCli({}, { DYN_SIM_ENGINE_PRESET: PRESET })).toMatchObject(limits);
    expect(resolveEngineOptions({ preset: PRESET })).toMatchObject(limits);
  });

  it('lets explicit flags, variables and library values win over the preset', () => {
    expect(engineOptionsFromCli({ preset: PRESET, numGpuBlocks: '128' }, { DYN_SIM_ENGINE_MAX_NUM_SEQS: '8' })).toMatchObject({
      numGpuBlocks: 128,
      maxNumSeqs: 8,
      maxNumBatchedTokens: 8192,
    });
    expect(resolveEngineOptions({ preset: PRESET, maxNumBatchedTokens: 512 })).toMatchObject({ numGpuBlocks: 31_809, maxNumBatchedTokens: 512 });
    // The preset's KV blocks follow the block size in use.
    expect(engineOptionsFromCli({ preset: PRESET, blockSize: '32' }, {}).numGpuBlocks).toBe(15_904);
  });

  it('reads --cost-model and --time-scale and their variables', () => {
    expect(engineOptionsFromCli({ costModel: 'fixed', timeScale: '2.5' }, {})).toMatchObject({ costModel: 'fixed', timeScale: 2.5 });
    expect(engineOptionsFromCli({}, { DYN_SIM_ENGINE_COST_MODEL: 'roofline', DYN_SIM_ENGINE_PRESET: PRESET, DYN_SIM_ENGINE_TIME_SCALE: '10' })).toMatchObject({
      costModel: 'roofline',
      timeScale: 10,
    });
  });

  it.each([
    [{ preset: 'llama-9000' }, '--preset', /^--preset: must be one of none, llama-3\.3-70b-fp8-2xh100, qwen2\.5-7b-fp16-l4, got "llama-9000"/],
    [{ costModel: 'gpu' }, '--cost-model', /^--cost-model: must be one of auto, fixed, roofline, got "gpu"/],
    [{ costModel: 'roofline' }, '--cost-model', /^--cost-model: roofline .* needs --preset/],
    [{ timeScale: '0' }, '--time-scale', /^--time-scale: must be a number > 0 and <= 10000, got 0/],
    [{ timeScale: 'fast' }, '--time-scale', /^--time-scale: must be a number > 0 and <= 10000, got 'fast'/],
  ] as const)('refuses %o, naming %s', (values, flag, message) => {
    expect(flagsOf(() => engineOptionsFromCli(values, {}))).toEqual([flag]);
    expect(() => engineOptionsFromCli(values, {})).toThrow(message);
  });

  it('names the variable of a bad env value, and reports every problem at once', () => {
    expect(flagsOf(() => engineOptionsFromCli({ timeScale: '-1' }, { DYN_SIM_ENGINE_PRESET: 'x', DYN_SIM_ENGINE_COST_MODEL: 'y' }))).toEqual([
      'DYN_SIM_ENGINE_PRESET',
      'DYN_SIM_ENGINE_COST_MODEL',
      '--time-scale',
    ]);
  });
});
