/**
 * The CLI as an operator meets it: bad input is one clear line naming the flag or variable and
 * exit code 2; --help documents every option with its env twin; a good start prints where it is.
 */
import { describe, expect, it } from 'vitest';
import { SIDECAR_OPTIONS } from '../../../src/sidecar/config/options.js';
import { testEngineClient, unary } from '../../support/grpc-client.js';
import { runCli, startSidecarProcess } from '../../support/sidecar-process.js';
import { startTestEngine } from '../../support/test-engine.js';
import { waitFor } from '../../support/wait.js';

describe('startup validation', () => {
  it.each([
    [['--engine-request-limit', '0'], {}, '--engine-request-limit must be an integer >= 1, got "0"'],
    [['--engine-request-limit', '-3'], {}, '--engine-request-limit must be an integer >= 1, got "-3"'],
    [['--engine-request-limit', '1.5'], {}, '--engine-request-limit must be an integer >= 1, got "1.5"'],
    [['--engine-request-limit', 'abc'], {}, '--engine-request-limit must be an integer >= 1, got "abc"'],
    [[], { DYN_ENGINE_REQUEST_LIMIT: '0' }, 'DYN_ENGINE_REQUEST_LIMIT must be an integer >= 1, got "0"'],
    [['--engine-request-limit', '4'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '1' }, 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT must be an integer >= 2, got "1"'],
    [['--engine-request-limit', '4'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: 'x' }, 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT must be an integer >= 2, got "x"'],
    [['--upstream', 'localhost'], {}, '--upstream: expected HOST:PORT'],
    [['--listen', '127.0.0.1:70000'], {}, '--listen: port must be 0-65535, got 70000'],
    [['--system-port', 'http'], {}, '--system-port must be an integer in 0..65535, got "http"'],
    [['--nats-url', 'http://x:1'], {}, '--nats-url must be nats://HOST:PORT'],
    [[], { NATS_SERVER: 'not a url' }, 'NATS_SERVER must be nats://HOST:PORT'],
    [['--engine-metrics-url', 'ftp://x/metrics'], {}, '--engine-metrics-url must be a http:// or https:// URL'],
    [['--engine-metrics-format', 'tgi'], {}, '--engine-metrics-format must be one of auto, vllm, sglang, trtllm-triton, trtllm-serve, got "tgi"'],
    [[], { DYN_TRACK_OUTPUT_BLOCKS: 'maybe' }, 'DYN_TRACK_OUTPUT_BLOCKS must be true or false, got "maybe"'],
    [['--bogus'], {}, "unknown option '--bogus'"],
  ] as [string[], Record<string, string>, string][])('%j %j exits 2 with a line naming the culprit', async (args, env, message) => {
    const result = await runCli(args, env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
    expect(result.stdout).not.toContain('listening on');
  });

  it('reports every problem at once', async () => {
    const result = await runCli(['--engine-request-limit', '0', '--listen', 'nope'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '1' });
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(3);
  });
});

describe('--help', () => {
  it('documents every option with its environment twin and exits 0', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    const text = result.stdout.replace(/\s+/g, ' ');
    for (const spec of Object.values(SIDECAR_OPTIONS) as { flag?: string; env: string }[]) {
      if (spec.flag) expect(text).toContain(spec.flag.split(' ')[0]);
      expect(text).toContain(spec.env);
    }
    expect(text).toContain('engine');
    expect(text).toContain('load');
  });
});

describe('startup line', () => {
  it('says where it listens, the upstream, the admission settings and the bound system port', async () => {
    const sidecar = await startSidecarProcess(['--upstream', '127.0.0.1:1', '--engine-request-limit', '32']);
    try {
      expect(sidecar.startupLine).toMatch(/^listening on 127\.0\.0\.1:\d+, upstream 127\.0\.0\.1:1, engine request limit 32 \+ queue 16 \(hard cap 48\), system port \d+$/);
      expect((await sidecar.get('/live')).status).toBe(200);
    } finally {
      expect(await sidecar.stop()).toBe(0);
    }
  });
});

describe('operator slips and signals', () => {
  it('warns about a mistyped DYN_ variable, naming the known one, and still starts', async () => {
    const sidecar = await startSidecarProcess(['--upstream', '127.0.0.1:1'], { DYN_ENGINE_REQUEST_LIMT: '32' });
    try {
      await waitFor(() => sidecar.stderr().includes('"started"'), 'the started log line');
      expect(sidecar.stderr()).toContain('DYN_ENGINE_REQUEST_LIMT is not a known setting; did you mean DYN_ENGINE_REQUEST_LIMIT?');
      expect(sidecar.startupLine).toContain('admission off');
      expect((await sidecar.get('/live')).status).toBe(200);
    } finally {
      expect(await sidecar.stop()).toBe(0);
    }
  });

  it('never logs the password or token of a NATS URL', async () => {
    const sidecar = await startSidecarProcess(['--upstream', '127.0.0.1:1', '--nats-url', 'nats://svc:hunter2@127.0.0.1:1,nats://s3cr3tt0k3n@127.0.0.1:2']);
    try {
      await waitFor(() => sidecar.stderr().includes('NATS not reachable'), 'the NATS warning');
    } finally {
      expect(await sidecar.stop()).toBe(0);
    }
    const output = sidecar.stderr() + sidecar.stdout();
    expect(output).toContain('nats://svc:***@127.0.0.1:1');
    expect(output).toContain('nats://***@127.0.0.1:2');
    expect(output).not.toContain('hunter2');
    expect(output).not.toContain('s3cr3tt0k3n');
  });

  it('logs SIGHUP and keeps serving; SIGTERM then exits 0', async () => {
    const engine = await startTestEngine();
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '4']);
    const client = testEngineClient(sidecar.address);
    try {
      sidecar.proc.kill('SIGHUP');
      await waitFor(() => sidecar.stderr().includes('SIGHUP received; configuration reload is not supported yet, ignoring'), 'the SIGHUP log line');
      sidecar.proc.kill('SIGHUP');
      await waitFor(() => sidecar.stderr().split('SIGHUP received').length === 3, 'the second SIGHUP log line');
      expect(sidecar.proc.exitCode).toBeNull();
      expect(sidecar.proc.signalCode).toBeNull();
      expect((await sidecar.get('/live')).status).toBe(200);
      expect((await unary(client, 'Unary', {})).code).toBe(0);
    } finally {
      client.close();
      expect(await sidecar.stop('SIGTERM')).toBe(0);
      await engine.close();
    }
  });
});
