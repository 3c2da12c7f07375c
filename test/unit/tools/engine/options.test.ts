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
