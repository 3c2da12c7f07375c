/**
 * Shedding that protects TTFT, against the real sidecar and the simulated engine:
 * --max-queue-wait-ms refuses at once a call whose expected wait is too long (instead of
 * holding it for that wait), and --first-token-limit holds calls in the sidecar's queue while
 * too many admitted calls still wait for their first token, although slots are free.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, streamTokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

const started: { stop(): Promise<unknown> }[] = [];
const clients: grpc.Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of started.splice(0).reverse()) await s.stop();
});

async function sidecar(engine: RunningEngine, args: string[]): Promise<{ s: SidecarProcess; client: grpc.Client }> {
  const s = await startSidecarProcess(['--upstream', engine.address, ...args], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4' });
  started.push(s);
  const client = engineClient(s.address);
  clients.push(client);
  return { s, client };
}

describe('--max-queue-wait-ms', () => {
  let engine: RunningEngine;
  beforeAll(async () => {
    engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 20 });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it('refuses at once a call whose expected wait exceeds it, with that wait as its pushback, and queues nothing', async () => {
    const { s, client } = await sidecar(engine, ['--engine-request-limit', '1', '--max-queue-wait-ms', '100']);
    // One call of ~20 x 20 ms teaches the sidecar how long a call holds its slot.
    expect((await streamTokens(client, 'teach', 8, 20).ended).code).toBe(grpc.status.OK);
    const long = streamTokens(client, 'long', 8, 400);
    await waitFor(async () => (await s.metric('dynamo_engine_request')) === 1, 'the long call in the engine');
    const refused = await streamTokens(client, 'newcomer', 8, 4).ended;
    expect(refused.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(Number(refused.pushbackMs), 'the pushback is the expected wait, above the 100 ms allowed').toBeGreaterThan(100);
    expect(await s.metric('dynamo_sidecar_rejections_total', 'reason="expected_wait"')).toBe(1);
    expect(await s.metric('dynamo_sidecar_queue_wait_seconds_count'), 'nobody was admitted from the queue').toBe(0);
    long.cancel();
    await long.ended;
  });

  it('without it, the same newcomer queues and is served', async () => {
    const { s, client } = await sidecar(engine, ['--engine-request-limit', '1']);
    expect((await streamTokens(client, 'teach', 8, 20).ended).code).toBe(grpc.status.OK);
    const first = streamTokens(client, 'first', 8, 20);
    await waitFor(async () => (await s.metric('dynamo_engine_request')) === 1, 'the first call in the engine');
    const second = streamTokens(client, 'second', 8, 4);
    await waitFor(async () => (await s.metric('dynamo_request_queue')) === 1, 'the newcomer queued');
    expect((await second.ended).code).toBe(grpc.status.OK);
    expect((await first.ended).code).toBe(grpc.status.OK);
  });
});

describe('--first-token-limit', () => {
  let engine: RunningEngine;
  beforeAll(async () => {
    // A slow prefill: a 400-token prompt takes about 400 ms before its first token.
    engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 10, prefillTokensPerS: 1000 });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it('holds a call in the queue while the admitted one awaits its first token, then admits it, although N has room', async () => {
    const { s, client } = await sidecar(engine, ['--engine-request-limit', '8', '--first-token-limit', '1']);
    const first = streamTokens(client, 'first', 400, 50);
    await waitFor(async () => (await s.metric('dynamo_engine_request')) === 1, 'the first call in the engine');
    const second = streamTokens(client, 'second', 8, 4);
    await waitFor(async () => (await s.metric('dynamo_request_queue')) === 1, 'the second call held in the queue');
    expect(await s.metric('dynamo_engine_request'), 'only the first is in the engine, 7 slots free').toBe(1);
    const ends = await Promise.all([first.ended, second.ended]);
    expect(ends.map((e) => e.code)).toEqual([grpc.status.OK, grpc.status.OK]);
    expect(await s.metric('dynamo_sidecar_queue_wait_seconds_count')).toBe(1);
  });
});
