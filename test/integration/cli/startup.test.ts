/**
 * The sidecar as a real process: a good start prints where it is, operator slips are warned about
 * and secrets never logged, SIGHUP without a config file is logged and changes nothing, SIGTERM exits 0. Usage errors and --help
 * are tested in process, in test/unit/cli/run-command.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { testEngineClient, unary } from '../../support/grpc-client.js';
import { startSidecarProcess } from '../../support/sidecar-process.js';
import { startTestEngine } from '../../support/test-engine.js';
import { waitFor } from '../../support/wait.js';

describe('startup line', () => {
  it('says where it listens, the upstream, the admission settings and the bound system port', async () => {
    const sidecar = await startSidecarProcess(['--upstream', '127.0.0.1:1', '--engine-request-limit', '32']);
    try {
      expect(sidecar.startupLine).toMatch(
        /^listening on 127\.0\.0\.1:\d+, upstream 127\.0\.0\.1:1, engine request limit 32 \+ queue 16 \(hard cap 48\), system port \d+$/,
      );
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
      const line = 'SIGHUP: nothing to re-read (no --config-file); settings unchanged';
      await waitFor(() => sidecar.stderr().includes(line), 'the SIGHUP log line');
      sidecar.proc.kill('SIGHUP');
      await waitFor(() => sidecar.stderr().split(line).length === 3, 'the second SIGHUP log line');
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
