/** Option tables' help text: a typed default written as --help shows it, next to the env twin. */
import { describe, expect, it } from 'vitest';
import { describeOption, envOnlyHelp, formatDefault, helpDefault, type OptionSpec } from '../../../../src/platform/config/option-spec.js';

describe('formatDefault', () => {
  it('writes each kind of default as --help shows it', () => {
    expect(formatDefault(250)).toBe('250');
    expect(formatDefault('info')).toBe('info');
    expect(formatDefault(true)).toBe('on');
    expect(formatDefault(false)).toBe('off');
    expect(formatDefault({ host: '0.0.0.0', port: 50050 })).toBe('0.0.0.0:50050');
    expect(formatDefault({ host: '::', port: 1 })).toBe('[::]:1');
    expect(formatDefault({ min: 64, max: 256 })).toBe('64-256');
    expect(formatDefault({ min: 8, max: 8 })).toBe('8');
    expect(formatDefault([529, 503])).toBe('529,503');
  });
});

describe('describeOption and helpDefault', () => {
  it('names the env twin and the default; defaultText wins over default', () => {
    const spec: OptionSpec = { flag: '--limit <n>', env: 'DYN_LIMIT', help: 'the limit', default: 32 };
    expect(describeOption(spec)).toBe('the limit (env DYN_LIMIT; default 32)');
    expect(helpDefault({ ...spec, defaultText: '32 (per rank)' })).toBe('32 (per rank)');
    expect(describeOption({ env: 'DYN_X', help: 'x' })).toBe('x (env DYN_X)');
    expect(helpDefault({ env: 'DYN_X', help: 'x' })).toBeUndefined();
  });
});

describe('envOnlyHelp', () => {
  it('lists only the settings without a flag, with their defaults', () => {
    const text = envOnlyHelp({
      flagged: { flag: '--a <n>', env: 'DYN_A', help: 'has a flag', default: 1 },
      token: { env: 'DYN_TOKEN', help: 'a secret' },
      level: { env: 'DYN_LEVEL', help: 'a level', default: 'info' },
    });
    expect(text).toBe('  DYN_TOKEN  a secret\n  DYN_LEVEL  a level (default info)');
  });
});
