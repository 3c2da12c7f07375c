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
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { grpcRequestHeaders, H2Wire, windowUpdateFrame } from '../../../support/h2-wire.js';
import { TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { LOADER_OPTIONS, TEST_ENGINE_PROTO } from '../../../support/test-engine.js';

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

// Issue: the drain ended when the gate was empty, but a call leaves the gate when its engine leg
// ends, before its last frames and trailers reach the client; the process then exited with them
// unsent, and the last calls got no status at all.
describe('SIGTERM delivers every admitted answer before it exits', () => {
  const DRAIN = ['--engine-request-limit', '2', '--drain-grace-ms', '20000'];
  const QUEUE = { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4' };

  it('unary: two calls in the engine and four queued at SIGTERM all end OK, in turn as the engine answers', async () => {
    const sidecar = await startSidecarProcess(['--upstream', engine.address, ...DRAIN], QUEUE);
    const client = testEngineClient(sidecar.address);
    try {
      const calls = Array.from({ length: 6 }, (_, i) => unary(client, 'Hold', { tag: `drain-${i}` }));
      await waitFor(() => engine.held === 2, 'two calls in the engine');
      await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 4, 'four calls queued');
      sidecar.proc.kill('SIGTERM');
      await waitFor(async () => (await sidecar.get('/ready')).status === 503, 'draining');
      for (let round = 0; round < 3; round++) {
        await waitFor(() => engine.held === 2, `two calls in the engine (round ${round + 1})`);
        engine.releaseHeld();
      }
      const outcomes = await Promise.all(calls);
      expect(outcomes.map((o) => o.code)).toEqual(Array.from({ length: 6 }, () => grpc.status.OK));
      expect(await sidecar.exited()).toBe(0);
    } finally {
      client.close();
      await sidecar.stop('SIGKILL');
    }
  });
});

describe('SIGTERM waits for a client that reads its answer slowly', () => {
  const echoType = loadSync(TEST_ENGINE_PROTO, LOADER_OPTIONS)['dynamo.sidecar.testing.EchoRequest'] as MessageTypeDefinition<object, object>;
  const ANSWER_BYTES = 256 * 1024;
  const DRIP_BYTES = 16 * 1024;

  // The sidecar reads the engine only as fast as the client reads, so a call keeps its slot until
  // the client has nearly all of its answer; the rest and the trailers wait in the sidecar after
  // the slot is free (the gate empty). The client then stops reading for longer than closing a
  // connection is given, and reads the rest after.
  it.each([
    ['unary', 'Unary', { payload: Buffer.alloc(ANSWER_BYTES, 0x61) }],
    ['server streaming', 'ServerStream', { count: ANSWER_BYTES / 4096, reply_bytes: 4096 }],
  ])('%s: the whole answer and its status reach the client, then the sidecar exits 0', async (_kind, method, request) => {
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--drain-grace-ms', '20000']);
    const wire = await H2Wire.connect(sidecar.port, { autoWindowUpdate: false });
    try {
      await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
      const id = wire.sendHeaders(grpcRequestHeaders(`${TEST_ENGINE_PATH}/${method}`));
      const body = frameMessage(echoType.serialize(request));
      expect(await wire.sendData(id, body, { endStream: true })).toBe(body.length);
      const stream = wire.stream(id);
      await wire.until(() => stream.dataBytes >= 60_000, 10_000, 'the first window of the answer');
      sidecar.proc.kill('SIGTERM');
      await waitFor(async () => (await sidecar.get('/ready')).status === 503, 'draining');
      let paused = false;
      for (let drip = 0; drip < 100 && !wire.isDone(id) && !wire.closed; drip++) {
        wire.write(Buffer.concat([windowUpdateFrame(0, DRIP_BYTES), windowUpdateFrame(id, DRIP_BYTES)]));
        await new Promise((resolve) => setTimeout(resolve, 100)); // the slow reader itself
        // A refused metrics request means the sidecar is closing: past the engine too.
        if (
          !paused &&
          (await sidecar.metric('dynamo_engine_request').then(
            (inEngine) => inEngine === 0,
            () => true,
          ))
        ) {
          paused = true;
          await new Promise((resolve) => setTimeout(resolve, 2000)); // a reader's stall, past the sidecar's 1 s to close a connection
        }
      }
      expect(paused, 'the engine was done before the client had read everything').toBe(true);
      expect(stream.dataBytes, 'answer bytes delivered').toBeGreaterThanOrEqual(ANSWER_BYTES);
      expect(wire.grpcStatus(id), 'the status in the trailers').toBe(0);
      expect(await sidecar.exited()).toBe(0);
    } finally {
      wire.destroy();
      await sidecar.stop('SIGKILL');
    }
  });
});
