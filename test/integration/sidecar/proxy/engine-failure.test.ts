/**
 * The engine going away: unreachable at start, killed mid-stream, restarted. The sidecar answers
 * UNAVAILABLE naming the engine, frees every slot, stays up, and recovers without a restart.
 */
import * as grpc from '@grpc/grpc-js';
import { createServer as createNetServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startEngineProcess, type EngineProcess } from '../../../support/engine-process.js';
import { testEngineClient, unary, type TestEngineClient } from '../../../support/grpc-client.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { waitFor } from '../../../support/wait.js';

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('engine failures', () => {
  let sidecar: SidecarProcess;
  let client: TestEngineClient;
  let engine: EngineProcess | undefined;
  let enginePort: number;

  it('answers UNAVAILABLE while the engine is unreachable, names it only in /ready, and reports not ready', async () => {
    enginePort = await freePort();
    sidecar = await startSidecarProcess(['--upstream', `127.0.0.1:${enginePort}`, '--engine-request-limit', '4']);
    cleanups.push(() => sidecar.stop());
    client = testEngineClient(sidecar.address);
    cleanups.push(() => client.close());

    const outcome = await unary(client, 'Unary', { payload: Buffer.from('x') });
    expect(outcome.code).toBe(grpc.status.UNAVAILABLE);
    // The engine's address is the operator's business, not the client's.
    expect(outcome.details).toBe('engine unavailable');
    expect(outcome.details).not.toContain(String(enginePort));
    const ready = await sidecar.get('/ready');
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toMatchObject({ status: 'not_ready', reason: expect.stringContaining(`127.0.0.1:${enginePort}`) });
    expect((await sidecar.get('/live')).status).toBe(200);
    expect(await sidecar.metric('dynamo_engine_request')).toBe(0);
    expect(await sidecar.metric('dynamo_sidecar_upstream_errors_total', 'kind="connect"')).toBeGreaterThanOrEqual(1);
  });

  it('recovers without a restart once the engine comes up', async () => {
    engine = await startEngineProcess(enginePort);
    cleanups.push(() => engine?.kill());
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'the sidecar to see the engine', 10_000);
    const outcome = await unary(client, 'Unary', { payload: Buffer.from('back') });
    expect(outcome.code).toBe(grpc.status.OK);
  });

  it('ends in-flight calls with UNAVAILABLE when the engine is killed mid-stream, and frees their slots', async () => {
    const receivedSoFar = [0, 0, 0];
    const streams = Array.from(
      { length: 3 },
      (_, i) =>
        new Promise<{ received: number; status: grpc.StatusObject }>((resolve) => {
          // A stream that will not finish on its own: 50k messages of 64 KiB, read slowly.
          const call = (client.Flood as (r: object) => grpc.ClientReadableStream<unknown>)({ count: 50_000, reply_bytes: 65_536 });
          let received = 0;
          call.on('data', () => (receivedSoFar[i] = ++received));
          call.on('error', () => {});
          call.on('status', (status: grpc.StatusObject) => resolve({ received, status }));
        }),
    );
    const held = unary(client, 'Hold', { tag: 'held-at-kill' });
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 4, 'four calls in the engine');
    await waitFor(() => receivedSoFar.every((n) => n > 0), 'every stream to be mid-flight');
    await engine!.kill();
    const outcomes = await Promise.all(streams);
    for (const { received, status } of outcomes) {
      expect(received).toBeGreaterThan(0);
      expect(status.code).toBe(grpc.status.UNAVAILABLE);
      expect(status.details).toContain('connection lost');
    }
    expect((await held).code).toBe(grpc.status.UNAVAILABLE);
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 0, 'all slots released');
    expect(sidecar.proc.exitCode).toBeNull();
    expect(await sidecar.metric('dynamo_sidecar_upstream_errors_total', 'kind="session_lost"')).toBe(4);
  });

  it('serves again after the engine restarts on the same port', async () => {
    engine = await startEngineProcess(enginePort);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'the sidecar to see the engine again', 10_000);
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => unary(client, 'Unary', { payload: Buffer.from(String(i)) })));
    expect(outcomes.map((o) => o.code)).toEqual(new Array(10).fill(grpc.status.OK));
  });
});
