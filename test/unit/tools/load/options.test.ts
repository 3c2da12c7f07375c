/** The load client's option table: defaults, env twins, and problems naming the flag or the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { LOAD_OPTIONS, resolveLoadOptions } from '../../../../src/tools/load/options.js';
import { loadSettingsFromCli, type LoadCommandSettings } from '../../../../src/tools/load/cli-options.js';
import { expectShownDefaultParsed } from '../../../support/option-defaults.js';

type Key = keyof typeof LOAD_OPTIONS;

/** Where each option lands, for those not in the options under their own name. */
const READ: Partial<Record<Key, (settings: LoadCommandSettings) => unknown>> = {
  overloadStatus: (s) => s.options.overloadStatuses,
  json: (s) => s.json,
  quiet: (s) => s.quiet,
};

function parsedValue(key: Key): unknown {
  // One of --target and --openai is required: each is read unset while the other is given.
  const settings = loadSettingsFromCli(key === 'target' ? { openai: 'http://127.0.0.1:8000' } : { target: '127.0.0.1:1' }, {});
  const read = READ[key];
  if (read) return read(settings);
  if (!(key in settings.options)) throw new Error(`option ${key} is not in the parsed options`);
  return (settings.options as unknown as Record<string, unknown>)[key];
}

function flagsOf(parse: () => unknown): string[] {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).errors.map((e) => e.flag).sort();
  }
  throw new Error('accepted');
}

describe('load option table', () => {
  it.each(Object.keys(LOAD_OPTIONS) as Key[])('%s: --help shows the default the parser gives when unset', (key) => {
    expectShownDefaultParsed(LOAD_OPTIONS[key], parsedValue(key));
  });

  it('gives every flag a DYN_LOAD_CLIENT_ twin of its own', () => {
    for (const spec of Object.values(LOAD_OPTIONS)) {
      expect(spec.env).toBe(
        `DYN_LOAD_CLIENT_${spec.flag
          .replace(/^--(no-)?| .*/g, '')
          .replaceAll('-', '_')
          .toUpperCase()}`,
      );
    }
  });

  it('reads the env twins, and a flag wins over its twin', () => {
    const env = {
      DYN_LOAD_CLIENT_TARGET: '127.0.0.1:1',
      DYN_LOAD_CLIENT_CONCURRENCY: '8',
      DYN_LOAD_CLIENT_MAX_TOKENS: '2-4',
      DYN_LOAD_CLIENT_STREAM: 'false',
      DYN_LOAD_CLIENT_JSON: 'yes',
    };
    expect(loadSettingsFromCli({}, env)).toMatchObject({
      options: { target: '127.0.0.1:1', concurrency: 8, maxTokens: { min: 2, max: 4 }, stream: false },
      json: true,
      quiet: false,
    });
    expect(loadSettingsFromCli({ target: '127.0.0.2:2', concurrency: '3', stream: true }, env).options).toMatchObject({
      target: '127.0.0.2:2',
      concurrency: 3,
      stream: false,
    });
    expect(loadSettingsFromCli({ stream: false }, { DYN_LOAD_CLIENT_TARGET: 'h:1', DYN_LOAD_CLIENT_STREAM: 'true' }).options.stream).toBe(false);
  });

  it('names the variable a bad value came from, and every problem at once', () => {
    const env = {
      DYN_LOAD_CLIENT_TARGET: '127.0.0.1:1',
      DYN_LOAD_CLIENT_RATE: 'fast',
      DYN_LOAD_CLIENT_MODEL: 'm',
      DYN_LOAD_CLIENT_QUIET: 'maybe',
      DYN_LOAD_CLIENT_PROMPT_TOKENS: '9-3',
    };
    expect(flagsOf(() => loadSettingsFromCli({ retry: '-1' }, env))).toEqual([
      '--retry',
      'DYN_LOAD_CLIENT_MODEL',
      'DYN_LOAD_CLIENT_PROMPT_TOKENS',
      'DYN_LOAD_CLIENT_QUIET',
      'DYN_LOAD_CLIENT_RATE',
    ]);
    expect(() => loadSettingsFromCli({}, { DYN_LOAD_CLIENT_OPENAI: 'http://h:1', DYN_LOAD_CLIENT_TARGET: 'h:1' })).toThrow(
      /^DYN_LOAD_CLIENT_OPENAI: cannot be combined with DYN_LOAD_CLIENT_TARGET/,
    );
    expect(() => loadSettingsFromCli({ target: 'h:1' }, { DYN_LOAD_CLIENT_RATE: 'fast' })).toThrow("DYN_LOAD_CLIENT_RATE: must be a number, got 'fast'");
  });

  it('names the flag for library callers', () => {
    expect(flagsOf(() => resolveLoadOptions({ target: 'h:1', concurrency: 0, graceS: -1 }))).toEqual(['--concurrency', '--grace-s']);
  });
});

describe('resolveLoadOptions request class', () => {
  it('takes an int32 priority and a visible-ASCII tenant from library callers, naming the flag otherwise', () => {
    expect(resolveLoadOptions({ target: 'h:1', priority: -(2 ** 31), tenant: 'a' })).toMatchObject({ priority: -(2 ** 31), tenant: 'a' });
    expect(flagsOf(() => resolveLoadOptions({ target: 'h:1', priority: 0.5, tenant: '' }))).toEqual(['--priority', '--tenant']);
    expect(flagsOf(() => resolveLoadOptions({ target: 'h:1', priority: 2 ** 31 }))).toEqual(['--priority']);
  });
});
