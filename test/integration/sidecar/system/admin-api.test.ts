/**
 * The admin API on a real sidecar's system port: off by default (404), the token from the
 * environment, 401/403/200, a PUT that reaches the gate, the gauges, the counter and the load
 * event at once, and the token nowhere in the process's output, even at debug level.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { runCleanups } from '../../../support/cleanups.js';
import { testEngineClient, unary, type TestEngineClient } from '../../../support/grpc-client.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

const TOKEN = 'it-admin-token-5f0c2a9e7b13';

async function admin(
  sidecar: SidecarProcess,
  method: string,
  body?: unknown,
  token: string | null = TOKEN,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`http://127.0.0.1:${sidecar.systemPort}/admission`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(5000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const cleanups: (() => unknown)[] = [];
let engine: TestEngine;
let sidecar: SidecarProcess;
let client: TestEngineClient;

beforeAll(async () => {
  engine = await startTestEngine();
  cleanups.push(() => engine.close());
  sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '2', '--log-level', 'debug'], {
    DYN_SIDECAR_ADMIN_TOKEN: TOKEN,
    DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4',
  });
  cleanups.push(() => sidecar.stop());
  client = testEngineClient(sidecar.address);
  cleanups.push(() => client.close());
});

afterAll(async () => {
  await runCleanups(cleanups);
});

describe('admin API', () => {
  it('is off without --admin-token: 404 saying how to turn it on', async () => {
    const plain = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '2']);
    try {
      const answer = await admin(plain, 'PUT', { engine_request_limit: 1 });
      expect(answer.status).toBe(404);
      expect(answer.body['error']).toContain('--admin-token');
      expect(await plain.metric('dynamo_sidecar_engine_request_limit')).toBe(2);
    } finally {
      await plain.stop();
    }
  });

  it('answers 401 without a token and 403 with a wrong one, changing nothing', async () => {
    expect((await admin(sidecar, 'PUT', { engine_request_limit: 1 }, null)).status).toBe(401);
    expect((await admin(sidecar, 'PUT', { engine_request_limit: 1 }, TOKEN + 'x')).status).toBe(403);
    expect((await admin(sidecar, 'GET')).body['engine_request_limit']).toBe(2);
  });

  it('PUT changes the gate, the gauges, the change counter and the load event at once; GET shows it', async () => {
    const held = Array.from({ length: 6 }, (_, i) => unary(client, 'Hold', { tag: `a${i}` }));
    await waitFor(async () => engine.held === 2 && (await sidecar.metric('dynamo_request_queue')) === 4, 'engine (2) and queue (4) full');
    const answer = await admin(sidecar, 'PUT', { engine_request_limit: 5, request_queue_limit: 8 });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ engine_request_limit: 5, request_queue_limit: 8, changed: ['engine_request_limit', 'request_queue_limit'] });
    // The load event carries the new limit as soon as the PUT has answered.
    const load = JSON.parse((await sidecar.get('/load')).body) as { ranks: LoadEvent[] };
    expect(load.ranks[0]!.engine_request_limit).toBe(5);
    expect(await sidecar.metric('dynamo_sidecar_engine_request_limit')).toBe(5);
    expect(await sidecar.metric('dynamo_sidecar_request_queue_capacity')).toBe(8);
    expect(await sidecar.metric('dynamo_sidecar_admission_changes_total', 'source="api"')).toBe(1);
    await waitFor(() => engine.held === 5, 'three queued calls admitted by the raise');
    expect(((await admin(sidecar, 'GET')).body['state'] as Record<string, unknown>)['engine_request']).toBe(5);
    engine.releaseHeld();
    await waitFor(() => engine.held === 1, 'the last queued call in the engine');
    engine.releaseHeld();
    for (const outcome of await Promise.all(held)) expect(outcome.code).toBe(grpc.status.OK);
  });

  it('refuses a bad body with 400 naming the field', async () => {
    const answer = await admin(sidecar, 'PUT', { engine_request_limit: 0 });
    expect(answer.status).toBe(400);
    expect(answer.body['error']).toContain('engine_request_limit');
    expect((await admin(sidecar, 'PUT', { request_queue_limt: 3 })).body['error']).toContain('unknown field request_queue_limt');
  });

  it('logged the change with its source, and never the token', () => {
    const lines = sidecar
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.find((l) => l['msg'] === 'admission changed')).toMatchObject({ source: 'api', engine_request_limit: '2 -> 5', request_queue_limit: '4 -> 8' });
    expect(sidecar.stderr()).not.toContain(TOKEN);
    expect(sidecar.stdout()).not.toContain(TOKEN);
  });
});
