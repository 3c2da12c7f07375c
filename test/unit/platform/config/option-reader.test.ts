/** The option reader: flag over env over a config file, typed values, and one problem per bad value naming its source. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { OptionReader, parseNatsServers, parseSwitch } from '../../../../src/platform/config/option-reader.js';

const SPECS = {
  limit: { flag: '--limit <n>', env: 'DYN_LIMIT', help: 'a limit', default: 8 },
  listen: { flag: '--listen <host:port>', env: 'DYN_LISTEN', help: 'where', default: { host: '0.0.0.0', port: 1 } },
  mode: { flag: '--mode <m>', env: 'DYN_MODE', help: 'a mode', default: 'fixed' },
  verbose: { flag: '--verbose', env: 'DYN_VERBOSE', help: 'a switch' },
  url: { flag: '--url <url>', env: 'DYN_URL', help: 'a URL' },
  name: { env: 'DYN_NAME', help: 'env only' },
  natsUrl: { flag: '--nats-url <url>', env: 'NATS_SERVER', help: 'servers' },
} as const;

type Flags = Record<string, string | boolean | undefined>;
const reader = (flags: Flags = {}, env: Record<string, string> = {}, file?: Record<string, string>): OptionReader<typeof SPECS> =>
  new OptionReader(flags, env, SPECS, file && { values: file, source: (name) => `${name} (f line 1)` });

describe('OptionReader sources', () => {
  it('takes the flag over the env over the file, and names where each value came from', () => {
    expect(reader({ limit: '3' }, { DYN_LIMIT: '4' }, { DYN_LIMIT: '5' }).raw('limit')).toEqual({ value: '3', source: '--limit' });
    expect(reader({}, { DYN_LIMIT: '4' }, { DYN_LIMIT: '5' }).raw('limit')).toEqual({ value: '4', source: 'DYN_LIMIT' });
    expect(reader({}, { DYN_LIMIT: ' ' }, { DYN_LIMIT: '5' }).raw('limit')).toEqual({ value: '5', source: 'DYN_LIMIT (f line 1)' });
    expect(reader().raw('limit')).toBeUndefined();
  });

  it('names an option by flag and variable, or the variable alone', () => {
    expect(reader().names('limit')).toBe('--limit or DYN_LIMIT');
    expect(reader().names('name')).toBe('DYN_NAME');
  });
});

describe('OptionReader values', () => {
  it('reads valid values and gives the default when unset', () => {
    const read = reader({ limit: '12', mode: 'adaptive', verbose: true }, { DYN_LISTEN: '127.0.0.1:9', DYN_URL: 'http://h:1/m', DYN_NAME: ' x ' });
    expect(read.integer('limit', 1, 100)).toBe(12);
    expect(read.hostPort('listen', false)).toEqual({ host: '127.0.0.1', port: 9 });
    expect(read.choice('mode', ['fixed', 'adaptive'])).toBe('adaptive');
    expect(read.boolean('verbose')).toBe(true);
    expect(read.url('url', ['http:'])).toBe('http://h:1/m');
    expect(read.string('name')).toBe('x');
    expect(read.problems).toEqual([]);
    expect(reader().integer('limit', 1, 100)).toBe(8);
    expect(reader().boolean('verbose')).toBe(false);
  });

  it('reports each bad value naming its source, gives the default, and throws them all with the command code', () => {
    const read = reader({ limit: '1.5', mode: 'other' }, { DYN_LISTEN: 'nohost', DYN_VERBOSE: 'maybe', DYN_URL: 'ftp://h', DYN_NAME: '' });
    expect(read.integer('limit', 1, 100)).toBe(8);
    expect(read.hostPort('listen', false)).toEqual({ host: '0.0.0.0', port: 1 });
    expect(read.choice('mode', ['fixed', 'adaptive'])).toBe('fixed');
    expect(read.boolean('verbose')).toBe(false);
    expect(read.url('url', ['http:', 'https:'])).toBeUndefined();
    expect(read.problems).toEqual([
      '--limit must be an integer in 1..100, got "1.5"',
      expect.stringMatching(/^DYN_LISTEN: /),
      '--mode must be one of fixed, adaptive, got "other"',
      'DYN_VERBOSE must be true or false, got "maybe"',
      'DYN_URL must be a http:// or https:// URL, got "ftp://h"',
    ]);
    expect(() => read.check('ERR_SIDECAR_CONFIG')).toThrow(ConfigError);
    expect(() => read.check('ERR_SIDECAR_CONFIG')).toThrow(expect.objectContaining({ code: 'ERR_SIDECAR_CONFIG', problems: read.problems }));
  });

  it('refuses digits in other spellings and says "an integer >= min" without an upper bound', () => {
    for (const text of ['1e3', '0x10', '-3', '']) {
      const read = reader({ limit: text || ' ' });
      read.integer('limit', 0, Number.MAX_SAFE_INTEGER);
      expect(read.problems).toEqual([`--limit must be an integer >= 0, got "${text || ' '}"`]);
    }
  });

  it('takes a sign only where the range has negative values', () => {
    expect(reader({ limit: '-3' }).integer('limit', -10, 10)).toBe(-3);
    expect(reader({ limit: '+4' }).integer('limit', -10, 10)).toBe(4);
    const read = reader({ limit: '-11' });
    read.integer('limit', -10, 10);
    expect(read.problems).toEqual(['--limit must be an integer in -10..10, got "-11"']);
  });
});

describe('parseSwitch', () => {
  it('reads the switch words in any case and nothing else', () => {
    expect(['TRUE', '1', 'yes', 'On'].map(parseSwitch)).toEqual([true, true, true, true]);
    expect(['false', '0', 'NO', 'off'].map(parseSwitch)).toEqual([false, false, false, false]);
    expect(parseSwitch('2')).toBeUndefined();
  });
});

describe('parseNatsServers', () => {
  it('takes comma-separated NATS URLs or host:port, and names the source of a bad list', () => {
    expect(parseNatsServers(reader({}, { NATS_SERVER: 'nats://a:4222, b:4223,tls://c:1' }))).toEqual(['nats://a:4222', 'b:4223', 'tls://c:1']);
    const read = reader({ natsUrl: 'http://a:1' });
    expect(parseNatsServers(read)).toBeUndefined();
    expect(read.problems).toEqual(['--nats-url must be nats://HOST:PORT (comma-separated for several), got "http://a:1"']);
  });
});
