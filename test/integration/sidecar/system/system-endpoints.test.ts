/**
 * The system port and the sidecar's own health service: Prometheus text that promtool accepts,
 * liveness and readiness, and grpc.health.v1 answered locally without taking an admission slot.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { promtoolCheckMetrics } from '../../../support/promtool.js';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { testEngineClient, unary, type TestEngineClient } from '../../../support/grpc-client.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

type HealthClient = grpc.Client & {
  Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res?: { status: string }) => void): void;
  Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
};

function healthClient(address: string): HealthClient {
  const definition = loadSync(join(PROTO_DIR, 'grpc/health/v1/health.proto'), { enums: String });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } };
  return new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
}

function check(client: HealthClient): Promise<string> {
  return new Promise((resolve, reject) => client.Check({ service: '' }, (err, res) => (err ? reject(err) : resolve(res!.status))));
}

let engine: TestEngine;
let sidecar: SidecarProcess;
let client: TestEngineClient;
let health: HealthClient;

beforeAll(async () => {
  engine = await startTestEngine();
  sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '1'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' });
  client = testEngineClient(sidecar.address);
  health = healthClient(sidecar.address);
});

afterAll(async () => {
  client?.close();
  health?.close();
  await sidecar?.stop();
  await engine?.close();
});

describe('system port', () => {
  it('serves /metrics that promtool check metrics accepts, with the Dynamo names and companions', async () => {
    await unary(client, 'Unary', {});
    const text = await sidecar.metrics();
    for (const name of [
      'dynamo_engine_request',
      'dynamo_request_queue',
      'dynamo_rejection_request_total',
      'dynamo_sidecar_engine_request_limit',
      'dynamo_sidecar_request_queue_capacity',
      'dynamo_sidecar_queue_wait_seconds_bucket',
      'dynamo_sidecar_requests_total{grpc_code="OK"}',
      'dynamo_sidecar_queue_cancelled_total',
      'dynamo_sidecar_queue_deadline_exceeded_total',
      'dynamo_sidecar_rejections_total{reason="queue_full"} 0',
      'dynamo_sidecar_rejections_total{reason="queue_timeout"} 0',
      'dynamo_sidecar_admission_changes_total',
      'dynamo_sidecar_retry_pushback_seconds 0.25',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(text).toContain(name);
    }
    const { code, output } = await promtoolCheckMetrics(text);
    expect(output).toBe('');
    expect(code).toBe(0);
  });

  it('answers /live, /ready and /health with 200 while the engine is reachable, 404 elsewhere', async () => {
    expect((await sidecar.get('/live')).status).toBe(200);
    expect(JSON.parse((await sidecar.get('/ready')).body)).toEqual({ status: 'ready' });
    expect((await sidecar.get('/health')).status).toBe(200);
    expect((await sidecar.get('/nope')).status).toBe(404);
  });
});

describe('grpc.health.v1 on the ingress port', () => {
  it('reports SERVING while the engine is reachable', async () => {
    expect(await check(health)).toBe('SERVING');
  });

  it('answers even when the engine slot and the whole queue are taken, and never reaches the engine', async () => {
    const held = Array.from({ length: 3 }, (_, i) => unary(client, 'Hold', { tag: `h${i}` }));
    await waitFor(async () => engine.held === 1 && (await sidecar.metric('dynamo_request_queue')) === 2, 'slot and queue full');
    const arrivalsBefore = engine.arrivals.length;
    for (let i = 0; i < 5; i++) expect(await check(health)).toBe('SERVING');
    expect(await sidecar.metric('dynamo_rejection_request_total')).toBe(0);
    expect(engine.arrivals.length).toBe(arrivalsBefore);
    for (let i = 0; i < 3; i++) {
      engine.releaseHeld();
      await waitFor(() => engine.held === 1 || i === 2, 'next queued call in the engine');
    }
    engine.releaseHeld();
    await Promise.all(held);
  });

  it('Watch streams SERVING, then NOT_SERVING when the sidecar starts draining', async () => {
    const statuses: string[] = [];
    const watch = health.Watch({ service: '' });
    watch.on('data', (m: { status: string }) => statuses.push(m.status));
    watch.on('error', () => {});
    await waitFor(() => statuses.length === 1, 'the first status');
    expect(statuses).toEqual(['SERVING']);
    sidecar.proc.kill('SIGTERM');
    await waitFor(() => statuses.includes('NOT_SERVING') || sidecar.proc.exitCode !== null, 'NOT_SERVING or exit');
    watch.cancel();
    expect(statuses[0]).toBe('SERVING');
  });
});
