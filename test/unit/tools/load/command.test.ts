// `load` subcommand usage, in process: an invalid or missing flag exits 2 with one line naming
// it, gRPC and --openai alike; --help documents the --openai mode. Runs against servers:
// test/integration/tools/load/command.test.ts and openai-command.test.ts.
import { describe, expect, it } from 'vitest';
import { LOAD_OPTIONS } from '../../../../src/tools/load/options.js';
import { runMain } from '../../../support/run-main.js';

describe('load command', () => {
  it.each([
    [['--concurrency', '0'], '--concurrency'],
    [['--prompt-tokens', '10-5'], '--prompt-tokens'],
    [['--rate', '5', '--concurrency', '2'], '--rate'],
    [['--arrival', 'bursty', '--rate', '1'], '--arrival'],
    [['--duration-s', 'long'], '--duration-s'],
  ])('exits 2 with one line naming the flag for %j', async (args, flag) => {
    const { err, exits } = await runMain(['load', '--target', '127.0.0.1:1', ...args]);
    expect(exits).toEqual([2]);
    expect(err.split('\n').filter(Boolean)).toHaveLength(1);
    expect(err).toContain(`${flag}:`);
  });

  it('exits 2 with one line naming the variable of a bad env twin', async () => {
    const { err, exits } = await runMain(['load', '--target', '127.0.0.1:1'], { DYN_LOAD_CLIENT_CONCURRENCY: '0' });
    expect(exits).toEqual([2]);
    expect(err).toBe('error: DYN_LOAD_CLIENT_CONCURRENCY: must be an integer from 1 to 100000, got 0\n');
  });

  it('exits 2 when --target is missing', async () => {
    const { err, exits } = await runMain(['load', '--count', '1']);
    expect(exits).toEqual([2]);
    expect(err).toContain('--target: is required');
  });
});

describe('load --openai command', () => {
  it.each([
    [['--openai', 'http://127.0.0.1:8000', '--target', '127.0.0.1:1'], '--openai', /cannot be combined with --target/],
    [['--count', '1'], '--target', /is required .*or --openai URL/],
    [['--openai', '127.0.0.1:8000'], '--openai', /http/],
    [['--openai', 'http://127.0.0.1:8000', '--api', 'embeddings'], '--api', /'chat' or 'completions'/],
    [['--openai', 'http://127.0.0.1:8000', '--overload-status', '5xx'], '--overload-status', /status codes/],
    [['--target', '127.0.0.1:1', '--model', 'm'], '--model', /only with --openai/],
    [['--openai', 'http://127.0.0.1:8000', '--retry-max-ms', '1'], '--retry-max-ms', />= 50/],
  ])('exits 2 with one line naming the flag for %j', async (args, flag, message) => {
    const { err, exits } = await runMain(['load', ...args]);
    expect(exits).toEqual([2]);
    const lines = err.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${flag}:`);
    expect(lines[0]).toMatch(message);
  });

  it('documents the mode in --help', async () => {
    const { out, exits } = await runMain(['load', '--help']);
    expect(exits).toEqual([0]);
    for (const flag of ['--openai <url>', '--model <name>', '--api <kind>', '--overload-status <code>', '--retry-max-ms <ms>']) expect(out).toContain(flag);
    for (const spec of Object.values(LOAD_OPTIONS)) expect(out.replace(/\s+/g, ' ')).toContain(`env ${spec.env}`);
    expect(out).toContain('load --openai http://127.0.0.1:8000 --concurrency 64 --duration-s 20');
  });
});
