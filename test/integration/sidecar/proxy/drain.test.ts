/**
 * SIGTERM: stop admitting (UNAVAILABLE), report not ready, let calls in the engine finish within
 * the grace period, then exit 0. Past the grace period, remaining calls are cut and it still exits.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngineClient, unary } from '../../../support/grpc-client.js';
import { startSidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';
import { H2Wire } from '../../../support/h2-wire.js';

let engine: TestEngine;
beforeAll(async () => {
  engine = await startTestEngine();
});
afterAll(async () => {
  await engine?.close();
});

describe('SIGTERM', () => {
  it('refuses new calls with UNAVAILABLE, lets admitted ones finish, then exits 0', async () => {
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '4', '--drain-grace-ms', '20000']);
    const client = testEngineClient(sidecar.address);
    try {
      const held = unary(client, 'Hold', { tag: 'in-flight-at-sigterm' });
      await waitFor(() => engine.held === 1, 'the call in the engine');
      sidecar.proc.kill('SIGTERM');
      await waitFor(async () => (await sidecar.get('/ready')).status === 503, 'not ready while draining');
      expect((JSON.parse((await sidecar.get('/ready')).body) as { reason?: string }).reason).toBe('worker draining');
      const refused = await unary(client, 'Unary', {});
      expect(refused.code).toBe(grpc.status.UNAVAILABLE);
      expect(refused.details).toBe('worker draining: not accepting new calls');
      expect(sidecar.proc.exitCode).toBeNull();
      engine.releaseHeld();
      expect((await held).code).toBe(grpc.status.OK);
      expect(await sidecar.exited()).toBe(0);
    } finally {
      client.close();
      await sidecar.stop();
    }
  });

  it('with --drain-delay-ms: reports draining at once but serves new calls for the delay, then refuses them; admitted calls finish', async () => {
    const DELAY_MS = 4000;
    const sidecar = await startSidecarProcess([
      '--upstream',
      engine.address,
      '--engine-request-limit',
      '4',
      '--drain-delay-ms',
      String(DELAY_MS),
      '--drain-grace-ms',
      '20000',
    ]);
    const client = testEngineClient(sidecar.address);
    try {
      const before = unary(client, 'Hold', { tag: 'admitted-before-sigterm' });
      await waitFor(() => engine.held === 1, 'the call in the engine');
      const signalledAt = Date.now();
      sidecar.proc.kill('SIGTERM');
      // At once: not ready (Kubernetes takes the endpoint out) and draining in the load event.
      await waitFor(async () => (await sidecar.get('/ready')).status === 503, 'not ready while the drain delay runs');
      expect(JSON.parse((await sidecar.get('/ready')).body)).toEqual({ status: 'not_ready', reason: 'worker draining' });
      const load = JSON.parse((await sidecar.get('/load')).body) as { ranks: { draining: boolean }[] };
      expect(load.ranks[0]!.draining).toBe(true);
      // During the delay, calls that still arrive are served as usual.
      expect((await unary(client, 'Unary', {})).code).toBe(grpc.status.OK);
      const during = unary(client, 'Hold', { tag: 'admitted-during-delay' });
      await waitFor(() => engine.held === 2, 'a call admitted during the delay');
      expect(Date.now() - signalledAt, 'checked within the delay').toBeLessThan(DELAY_MS);
      // After the delay: refused, as without one.
      let refused: Awaited<ReturnType<typeof unary>> | undefined;
      await waitFor(
        async () => {
          const outcome = await unary(client, 'Unary', {});
          if (outcome.code === grpc.status.OK) return false;
          refused = outcome;
          return true;
        },
        'new calls refused once the delay is over',
        DELAY_MS + 10_000,
        50,
      );
      expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(DELAY_MS);
      expect([refused!.code, refused!.details]).toEqual([grpc.status.UNAVAILABLE, 'worker draining: not accepting new calls']);
      expect(sidecar.proc.exitCode).toBeNull();
      engine.releaseHeld();
      expect((await before).code).toBe(grpc.status.OK);
      expect((await during).code).toBe(grpc.status.OK);
      expect(await sidecar.exited()).toBe(0);
    } finally {
      client.close();
      await sidecar.stop();
    }
  });

  it('cuts calls still running when the grace period is over with UNAVAILABLE (retryable elsewhere), and exits 0', async () => {
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--drain-grace-ms', '300']);
    const client = testEngineClient(sidecar.address);
    try {
      const held = unary(client, 'Hold', { tag: 'outlives-grace' });
      await waitFor(() => engine.held === 1, 'the call in the engine');
      const started = Date.now();
      expect(await sidecar.stop()).toBe(0);
      expect(Date.now() - started).toBeLessThan(5000);
      const cut = await held;
      expect(cut.code).toBe(grpc.status.UNAVAILABLE);
      expect(cut.details).toBe('worker shutting down: call cut at the end of the drain grace period');
      await waitFor(() => engine.held === 0, 'the engine to see the cut call go');
    } finally {
      client.close();
    }
  });

  it('exits 0 soon after the grace although an idle client keeps its connection open and never closes it', async () => {
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--drain-grace-ms', '1000']);
    // Preface and SETTINGS, no call; our side stays open after the sidecar's GOAWAY and FIN.
    const idle = await H2Wire.connect(sidecar.port, { halfOpen: true });
    try {
      await idle.until(() => idle.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
      const started = Date.now();
      sidecar.proc.kill('SIGTERM');
      await idle.until(() => idle.goaway !== undefined, 5000, 'GOAWAY');
      // Bounded: the grace (1 s) and the delayed close (1 s), with room for a loaded machine.
      const code = await Promise.race([sidecar.exited(), new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 8000).unref())]);
      expect(code, `still running ${Date.now() - started} ms after SIGTERM`).toBe(0);
      expect(idle.closed).toBe(false);
    } finally {
      idle.destroy();
      await sidecar.stop('SIGKILL');
    }
  });
});
