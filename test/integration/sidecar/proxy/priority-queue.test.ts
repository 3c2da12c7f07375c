/**
 * The sidecar's queue by priority and tenant, against a real sidecar process: urgent calls
 * overtake and displace batch ones, tenants take turns, bad metadata is refused, and the
 * metrics count each class. The order is read inside the engine (the HEADERS it received).
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testEngineClient, unary, type TestEngineClient, type UnaryOutcome } from '../../../support/grpc-client.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type EchoReply, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

function hold(client: TestEngineClient, tag: string, callClass: { priority?: string; tenant?: string } = {}): Promise<UnaryOutcome<EchoReply>> {
  const metadata = new grpc.Metadata();
  metadata.set('x-tag', tag);
  if (callClass.priority !== undefined) metadata.set('x-request-priority', callClass.priority);
  if (callClass.tenant !== undefined) metadata.set('x-tenant-id', callClass.tenant);
  return unary<EchoReply>(client, 'Hold', { tag }, { metadata });
}

let engine: TestEngine;
let sidecar: SidecarProcess;
let client: TestEngineClient;

beforeAll(async () => {
  engine = await startTestEngine();
  sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '1', '--metrics-max-tenants', '3'], {
    DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4',
  });
  client = testEngineClient(sidecar.address);
});

afterAll(async () => {
  client?.close();
  await sidecar?.stop();
  await engine?.close();
});

afterEach(async () => {
  await waitFor(
    async () => (engine.releaseHeld(), (await sidecar.metric('dynamo_engine_request')) === 0 && (await sidecar.metric('dynamo_request_queue')) === 0),
    'gauges at 0',
  );
  engine.resetStats();
});

/** Holds one call in the engine (N = 1), so that what follows queues. Wrapped: an async function would wait for the call itself. */
async function blockEngine(): Promise<{ blocker: Promise<UnaryOutcome<EchoReply>> }> {
  const blocker = hold(client, 'blocker');
  await waitFor(() => engine.held === 1, 'the blocker in the engine');
  return { blocker };
}

/** Releases the held call, one at a time, until `count` more calls have reached the engine. */
async function releaseInTurn(count: number): Promise<string[]> {
  const before = engine.headerArrivals.length;
  await waitFor(
    () => {
      if (engine.headerArrivals.length >= before + count) return true;
      engine.releaseHeld(1);
      return false;
    },
    `${count} queued calls to reach the engine`,
    10_000,
    5,
  );
  return engine.headerArrivals.slice(before);
}

describe('a sidecar with N = 1 and Q = 4', () => {
  it('admits urgent calls first, and displaces the newest batch call for them once the queue is full', async () => {
    const { blocker } = await blockEngine();
    const batch = ['b1', 'b2', 'b3', 'b4'].map((tag) => hold(client, tag, { priority: '5' }));
    await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 4, 'four batch calls queued');
    const urgent = hold(client, 'u1', { priority: '-1' });
    const displaced = await batch[3]!;
    expect(displaced.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(displaced.details).toBe('Server overloaded: worker at capacity');
    expect(Number(displaced.trailers!.get('grpc-retry-pushback-ms')[0])).toBeGreaterThan(0);
    expect(await sidecar.metric('dynamo_request_queue')).toBe(4);
    // A batch call arriving now finds no one below it: refused as queue_full.
    expect((await hold(client, 'b5', { priority: '5' })).code).toBe(grpc.status.RESOURCE_EXHAUSTED);

    expect(await releaseInTurn(4)).toEqual(['u1', 'b1', 'b2', 'b3']);
    engine.releaseHeld();
    for (const outcome of await Promise.all([blocker, urgent, ...batch.slice(0, 3)])) expect(outcome.code).toBe(grpc.status.OK);
    expect(await sidecar.metric('dynamo_sidecar_rejections_total', 'reason="displaced"')).toBe(1);
    expect(await sidecar.metric('dynamo_sidecar_rejections_total', 'reason="queue_full"')).toBe(1);
    expect(await sidecar.metric('dynamo_sidecar_class_requests_total', 'priority="5",tenant="",outcome="rejected"')).toBe(2);
    expect(await sidecar.metric('dynamo_sidecar_class_requests_total', 'priority="-1",tenant="",outcome="admitted"')).toBe(1);
  });

  it("serves tenants in turn, so one tenant's burst does not go ahead of the others", async () => {
    const { blocker } = await blockEngine();
    const calls = [hold(client, 'noisy1', { tenant: 'noisy' }), hold(client, 'noisy2', { tenant: 'noisy' }), hold(client, 'noisy3', { tenant: 'noisy' })];
    await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 3, 'the burst queued');
    calls.push(hold(client, 'polite1', { tenant: 'polite' }));
    await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 4, 'the polite call queued');
    // Full: a second polite call takes the place of the noisy tenant's newest (3 places against 1).
    const second = hold(client, 'polite2', { tenant: 'polite' });
    expect((await calls[2]!).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(await releaseInTurn(4)).toEqual(['noisy1', 'polite1', 'noisy2', 'polite2']);
    engine.releaseHeld();
    for (const outcome of await Promise.all([blocker, calls[0]!, calls[1]!, calls[3]!, second])) expect(outcome.code).toBe(grpc.status.OK);
    expect(await sidecar.metric('dynamo_sidecar_class_requests_total', 'priority="0",tenant="polite",outcome="admitted"')).toBe(2);
    expect(await sidecar.metric('dynamo_sidecar_class_requests_total', 'priority="0",tenant="noisy",outcome="rejected"')).toBe(1);
  });

  it('refuses metadata it cannot read with INVALID_ARGUMENT, before any slot or place', async () => {
    for (const callClass of [{ priority: 'urgent' }, { priority: '99999999999' }, { tenant: 'two words' }]) {
      const outcome = await hold(client, 'bad', callClass);
      expect(outcome.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(outcome.details).toMatch(/x-request-priority|x-tenant-id/);
    }
    expect(engine.headerArrivals).toEqual([]);
  });
});
