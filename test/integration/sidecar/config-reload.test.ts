/**
 * SIGHUP on a real sidecar process: --config-file read at start-up, its live settings applied
 * again on SIGHUP (queued calls admitted by a raise), a setting that needs a restart logged and
 * ignored, a bad file changing nothing, and a sidecar without a file saying there is nothing to re-read.
 */
import * as grpc from '@grpc/grpc-js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCleanups } from '../../support/cleanups.js';
import { testEngineClient, unary } from '../../support/grpc-client.js';
import { startSidecarProcess, type SidecarProcess } from '../../support/sidecar-process.js';
import { startTestEngine, type TestEngine } from '../../support/test-engine.js';
import { waitFor } from '../../support/wait.js';

const cleanups: (() => unknown)[] = [];
let engine: TestEngine;
let dir: string;

beforeAll(async () => {
  engine = await startTestEngine();
  dir = mkdtempSync(join(tmpdir(), 'sidecar-config-'));
  cleanups.push(
    () => engine.close(),
    () => rmSync(dir, { recursive: true, force: true }),
  );
});

afterAll(async () => {
  await runCleanups(cleanups);
});

function logLines(sidecar: SidecarProcess, msg: string): Record<string, unknown>[] {
  return sidecar
    .stderr()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line['msg'] === msg);
}

describe('SIGHUP', () => {
  it('re-reads --config-file: live settings applied at once, others logged as needing a restart, a bad file changes nothing', async () => {
    const file = join(dir, 'sidecar.env');
    writeFileSync(file, '# admission\nDYN_ENGINE_REQUEST_LIMIT=2\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=4\nDYN_SIDECAR_MAX_CONCURRENT_STREAMS=100\n');
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--config-file', file]);
    const client = testEngineClient(sidecar.address);
    cleanups.push(
      () => sidecar.stop(),
      () => client.close(),
    );
    expect(sidecar.startupLine).toContain('engine request limit 2 + queue 4');
    const calls = Array.from({ length: 5 }, (_, i) => unary(client, 'Hold', { tag: `h${i}` }));
    await waitFor(async () => engine.held === 2 && (await sidecar.metric('dynamo_request_queue')) === 3, '2 in the engine, 3 queued');

    writeFileSync(file, '# admission\nDYN_ENGINE_REQUEST_LIMIT=4\nDYN_DYNAMO_REQUEST_QUEUE_LIMIT=4\nDYN_SIDECAR_MAX_CONCURRENT_STREAMS=10\n');
    sidecar.proc.kill('SIGHUP');
    await waitFor(() => engine.held === 4, 'two queued calls admitted by the raise');
    expect(await sidecar.metric('dynamo_sidecar_engine_request_limit')).toBe(4);
    expect(await sidecar.metric('dynamo_sidecar_admission_changes_total', 'source="sighup"')).toBe(1);
    await waitFor(() => logLines(sidecar, 'SIGHUP: config file re-read').length === 1, 'the re-read logged');
    expect(logLines(sidecar, 'admission changed')[0]).toMatchObject({ source: 'sighup', engine_request_limit: '2 -> 4' });
    expect(logLines(sidecar, 'SIGHUP: config file changes settings that need a restart; ignored')[0]).toMatchObject({
      settings: ['DYN_SIDECAR_MAX_CONCURRENT_STREAMS'],
    });

    writeFileSync(file, 'DYN_ENGINE_REQUEST_LIMIT=zero\n');
    sidecar.proc.kill('SIGHUP');
    await waitFor(() => logLines(sidecar, 'SIGHUP: config file not applied, settings unchanged').length === 1, 'the bad file refused');
    expect(logLines(sidecar, 'SIGHUP: config file not applied, settings unchanged')[0]!['problems']).toEqual([
      `DYN_ENGINE_REQUEST_LIMIT (${file} line 1) must be a positive integer or auto, got "zero"`,
    ]);
    expect(await sidecar.metric('dynamo_sidecar_engine_request_limit')).toBe(4);

    engine.releaseHeld();
    await waitFor(() => engine.held === 1, 'the last queued call in the engine');
    engine.releaseHeld();
    for (const outcome of await Promise.all(calls)) expect(outcome.code).toBe(grpc.status.OK);
    expect(sidecar.proc.exitCode).toBeNull();
  });

  it('without --config-file: logs that there is nothing to re-read and keeps running', async () => {
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '3']);
    cleanups.push(() => sidecar.stop());
    sidecar.proc.kill('SIGHUP');
    await waitFor(() => logLines(sidecar, 'SIGHUP: nothing to re-read (no --config-file); settings unchanged').length === 1, 'the SIGHUP logged');
    expect((await sidecar.get('/ready')).status).toBe(200);
    expect(await sidecar.metric('dynamo_sidecar_engine_request_limit')).toBe(3);
  });
});
