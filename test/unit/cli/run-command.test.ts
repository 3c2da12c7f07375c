/**
 * The sidecar command (`run`, the default) as an operator meets it, in process: bad input is one
 * clear line naming the flag or variable and exit code 2, every problem at once; --help documents
 * every option with its env twin. Starting, signals and the startup line are in
 * test/integration/cli/startup.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { SIDECAR_OPTIONS } from '../../../src/sidecar/config/options.js';
import { runMain } from '../../support/run-main.js';

describe('startup validation', () => {
  it.each([
    [['--engine-request-limit', '0'], {}, '--engine-request-limit must be a positive integer or auto, got "0"'],
    [['--engine-request-limit', '-3'], {}, '--engine-request-limit must be a positive integer or auto, got "-3"'],
    [['--engine-request-limit', '1.5'], {}, '--engine-request-limit must be a positive integer or auto, got "1.5"'],
    [['--engine-request-limit', 'abc'], {}, '--engine-request-limit must be a positive integer or auto, got "abc"'],
    [[], { DYN_ENGINE_REQUEST_LIMIT: '0' }, 'DYN_ENGINE_REQUEST_LIMIT must be a positive integer or auto, got "0"'],
    [['--engine-request-limit', '4'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '1' }, 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT must be an integer >= 2, got "1"'],
    [['--engine-request-limit', '4'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: 'x' }, 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT must be an integer >= 2, got "x"'],
    [['--upstream', 'localhost'], {}, '--upstream: expected HOST:PORT'],
    [['--listen', '127.0.0.1:70000'], {}, '--listen: port must be 0-65535, got 70000'],
    [['--upstream-connections', '0'], {}, '--upstream-connections must be an integer in 1..64, got "0"'],
    [[], { DYN_SIDECAR_UPSTREAM_CONNECTIONS: 'many' }, 'DYN_SIDECAR_UPSTREAM_CONNECTIONS must be an integer in 1..64, got "many"'],
    [['--system-port', 'http'], {}, '--system-port must be an integer in 0..65535, got "http"'],
    [['--nats-url', 'http://x:1'], {}, '--nats-url must be nats://HOST:PORT'],
    [[], { NATS_SERVER: 'not a url' }, 'NATS_SERVER must be nats://HOST:PORT'],
    [['--engine-metrics-url', 'ftp://x/metrics'], {}, '--engine-metrics-url must be a http:// or https:// URL'],
    [['--engine-metrics-format', 'tgi'], {}, '--engine-metrics-format must be one of auto, vllm, sglang, trtllm-triton, trtllm-serve, got "tgi"'],
    [[], { DYN_TRACK_OUTPUT_BLOCKS: 'maybe' }, 'DYN_TRACK_OUTPUT_BLOCKS must be true or false, got "maybe"'],
    [['--config-file', '/nonexistent/sidecar.env'], {}, '--config-file: cannot read "/nonexistent/sidecar.env"'],
    [['--admin-token', 'short'], {}, '--admin-token must be at least 16 characters, got 5 (the value is not shown)'],
    [['--retry-pushback-mode', 'smart'], {}, '--retry-pushback-mode must be one of fixed, adaptive, got "smart"'],
    [[], { DYN_DYNAMO_REQUEST_QUEUE_TIMEOUT_MS: 'soon' }, 'DYN_DYNAMO_REQUEST_QUEUE_TIMEOUT_MS must be an integer in 0..3600000, got "soon"'],
    [['--bogus'], {}, "unknown option '--bogus'"],
  ] as [string[], Record<string, string>, string][])('%j %j exits 2 with a line naming the culprit', async (args, env, message) => {
    const result = await runMain(args, env);
    expect(result.exits).toEqual([2]);
    expect(result.err).toContain(message);
    expect(result.out).not.toContain('listening on');
  });

  it('reports every problem at once', async () => {
    const result = await runMain(['--engine-request-limit', '0', '--listen', 'nope'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '1' });
    expect(result.exits).toEqual([2]);
    expect(result.err.trim().split('\n')).toHaveLength(3);
  });
});

describe('--help', () => {
  it('documents every option with its environment twin and exits 0', async () => {
    const result = await runMain(['--help']);
    expect(result.exits).toEqual([0]);
    const text = result.out.replace(/\s+/g, ' ');
    for (const spec of Object.values(SIDECAR_OPTIONS) as { flag?: string; env: string }[]) {
      if (spec.flag) expect(text).toContain(spec.flag.split(' ')[0]);
      expect(text).toContain(spec.env);
    }
    expect(text).toContain('engine');
    expect(text).toContain('load');
  });

  it('documents the engine ping timeout', async () => {
    const help = await runMain(['--help']);
    expect(help.out).toContain('--upstream-ping-timeout-ms');
  });

  it('documents the connection limits, each with its env twin', async () => {
    const help = await runMain(['--help']);
    for (const [flag, env] of [
      ['--max-concurrent-streams', 'DYN_SIDECAR_MAX_CONCURRENT_STREAMS'],
      ['--idle-timeout-ms', 'DYN_SIDECAR_IDLE_TIMEOUT_MS'],
      ['--handshake-timeout-ms', 'DYN_SIDECAR_HANDSHAKE_TIMEOUT_MS'],
    ]) {
      expect(help.out, `--help names ${flag}`).toContain(flag);
      expect(help.out, `--help names ${env}`).toContain(env);
    }
  });
});
