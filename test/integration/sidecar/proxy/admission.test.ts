/**
 * Worker-side admission against a real sidecar process: exact cap under burst, FIFO, queue
 * cancellation and deadlines, and admission off. Concurrency is measured inside the engine.
 */
import * as grpc from '@grpc/grpc-js';
import { constants } from 'node:http2';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testEngineClient, unary, type TestEngineClient, type UnaryOutcome } from '../../../support/grpc-client.js';
import { rawCall, TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type EchoReply, type TestEngine } from '../../../support/test-engine.js';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { waitFor } from '../../../support/wait.js';

const OVERLOADED = 'Server overloaded: worker at capacity';
const EMPTY = new Uint8Array(0);

/** A Hold call whose tag also travels as `x-tag` metadata, so the engine can record HEADERS order. */
function hold(
  client: TestEngineClient,
  tag: string,
  options: { deadlineMs?: number | undefined; onCall?: (call: grpc.ClientUnaryCall) => void } = {},
): Promise<UnaryOutcome<EchoReply>> {
  const metadata = new grpc.Metadata();
  metadata.set('x-tag', tag);
  return unary<EchoReply>(client, 'Hold', { tag }, { ...options, metadata });
}

let engine: TestEngine;

beforeAll(async () => {
  engine = await startTestEngine();
});

afterAll(async () => {
  await engine?.close();
});

describe('with --engine-request-limit 8 and DYN_DYNAMO_REQUEST_QUEUE_LIMIT=4', () => {
  let sidecar: SidecarProcess;
  let client: TestEngineClient;

  beforeAll(async () => {
    sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '8'], { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4' });
    client = testEngineClient(sidecar.address);
  });

  afterAll(async () => {
    client?.close();
    await sidecar?.stop();
  });

  afterEach(async () => {
    await waitFor(
      async () => (engine.releaseHeld(), (await sidecar.metric('dynamo_engine_request')) === 0 && (await sidecar.metric('dynamo_request_queue')) === 0),
      'gauges at 0',
    );
    engine.resetStats();
    engine.autoRelease = () => false;
  });

  it('holds exactly 8 in the engine and 4 queued out of a 2,000-call burst, rejecting the other 1,988 at once', async () => {
    const rejectionsBefore = await sidecar.metric('dynamo_rejection_request_total');
    const outcomes: (UnaryOutcome<EchoReply> | undefined)[] = Array.from({ length: 2000 }, () => undefined);
    const calls = Array.from({ length: 2000 }, (_, i) => hold(client, String(i)).then((outcome) => (outcomes[i] = outcome)));
    const settled = (): UnaryOutcome<EchoReply>[] => outcomes.filter((o): o is UnaryOutcome<EchoReply> => o !== undefined);

    await waitFor(() => settled().length === 1988 && engine.held === 8, '1,988 rejections and 8 held calls', 30_000);
    expect(await sidecar.metric('dynamo_engine_request')).toBe(8);
    expect(await sidecar.metric('dynamo_request_queue')).toBe(4);
    expect(await sidecar.metric('dynamo_rejection_request_total')).toBe(rejectionsBefore + 1988);
    for (const outcome of settled()) {
      expect(outcome.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(outcome.details).toBe(OVERLOADED);
      expect(Number(outcome.trailers!.get('grpc-retry-pushback-ms')[0])).toBeGreaterThan(0);
    }
    // The 12 calls that got in are the first 12 sent: nobody overtook anybody.
    const admittedTags = outcomes.map((o, i) => (o === undefined ? i : -1)).filter((i) => i >= 0);
    expect(admittedTags).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);

    await waitFor(
      () => {
        if (settled().length === 2000) return true;
        engine.releaseHeld(); // and the queued calls that took the freed slots, on the next round
        return false;
      },
      'all 2,000 calls to settle as the engine releases the held ones',
      30_000,
      5,
    );
    await Promise.all(calls);
    expect(settled().filter((o) => o.code === grpc.status.OK)).toHaveLength(12);
    expect(engine.maxActive).toBe(8);
    // Queued calls were sent to the engine in the order they arrived.
    expect(engine.headerArrivals.slice(8).map(Number)).toEqual([8, 9, 10, 11]);
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 0, 'engine gauge back to 0');
    expect(await sidecar.metric('dynamo_request_queue')).toBe(0);
  });

  it('keeps the cap, FIFO and empty gauges with random client cancels and deadlines mixed in (seeded)', async () => {
    const random = mulberry32(20261202);
    const outcomes = new Map<number, UnaryOutcome<EchoReply>>();
    const cancelledWhileQueued = new Set<number>();
    const expiredInQueue = new Set<number>();
    const live = new Map<number, grpc.ClientUnaryCall>();
    const pending: Promise<unknown>[] = [];
    let nextTag = 0;
    // Calls with a deadline are answered as soon as they reach the engine, so none can expire
    // there and free a slot behind the test's back: the engine only changes when the test
    // releases, which makes "live and not held by the engine" mean "queued in the sidecar".
    const withDeadline = new Set<number>();
    engine.autoRelease = (tag) => withDeadline.has(Number(tag));
    const send = (deadlineMs: number | undefined): number => {
      const tag = nextTag++;
      if (deadlineMs !== undefined) withDeadline.add(tag);
      pending.push(
        hold(client, String(tag), { deadlineMs, onCall: (call) => live.set(tag, call) }).then((o) => {
          outcomes.set(tag, o);
          live.delete(tag);
        }),
      );
      return tag;
    };

    // One call surely expires in the queue (how many of the random mix below do depends on the
    // machine's timing, usually 5-11, and it can be none): a full engine, then a call with a
    // short deadline, released only after that call has ended.
    for (let k = 0; k < 8; k++) send(undefined);
    await waitFor(() => engine.held === 8, 'the engine full');
    const expiring = send(100);
    await waitFor(() => outcomes.has(expiring), 'the queued call to reach its deadline');
    expect(outcomes.get(expiring)!.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    engine.releaseHeld();

    for (let round = 0; round < 25; round++) {
      const burst = 5 + Math.floor(random() * 30);
      for (let k = 0; k < burst; k++) send(random() < 0.25 ? 30 + Math.floor(random() * 120) : undefined);
      // Quiescent: every call sent is answered, held by the engine, or queued, and every call the
      // sidecar dispatched has reached the engine. Then a live call whose HEADERS never reached the
      // engine is surely queued (one that did may be answered but not yet seen by the client).
      await waitFor(async () => {
        const queued = await sidecar.metric('dynamo_request_queue');
        const inEngine = await sidecar.metric('dynamo_engine_request');
        return outcomes.size + engine.held + queued === nextTag && inEngine === engine.held;
      }, 'the burst to settle');
      const reachedEngine = new Set(engine.headerArrivals.map(Number));
      for (const [tag, call] of live) {
        if (!reachedEngine.has(tag) && random() < 0.3) {
          cancelledWhileQueued.add(tag);
          call.cancel();
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 10 + random() * 60)); // deliberate: seeded pacing, so some queued deadlines pass
      engine.releaseHeld(Math.floor(random() * 10));
      expect(engine.maxActive).toBeLessThanOrEqual(8);
      expect(await sidecar.metric('dynamo_request_queue')).toBeLessThanOrEqual(4);
    }
    // Drain everything still held or queued.
    await waitFor(
      () => {
        if (outcomes.size === nextTag) return true;
        engine.releaseHeld();
        return false;
      },
      'every call to end as the engine releases the held ones',
      20_000,
    );
    await Promise.all(pending);

    for (const [tag, outcome] of outcomes)
      if (outcome.code === grpc.status.DEADLINE_EXCEEDED && !engine.headerArrivals.includes(String(tag))) expiredInQueue.add(tag);
    // HEADERS order at the engine is the sidecar's dispatch order.
    const arrivals = engine.headerArrivals.map(Number);
    expect(engine.maxActive).toBeLessThanOrEqual(8);
    // Nothing cancelled while queued was ever sent to the engine, not even its headers.
    for (const tag of cancelledWhileQueued) expect(arrivals).not.toContain(tag);
    expect(cancelledWhileQueued.size).toBeGreaterThan(0);
    expect([...expiredInQueue]).toContain(expiring); // never sent to the engine
    // FIFO end to end: one client connection, so calls reached the engine in the order they were sent.
    expect(arrivals).toEqual([...arrivals].sort((a, b) => a - b));
    // Every call ended with a status the scenario explains.
    const codes = new Set([...outcomes.values()].map((o) => o.code));
    for (const code of codes) expect([grpc.status.OK, grpc.status.RESOURCE_EXHAUSTED, grpc.status.CANCELLED, grpc.status.DEADLINE_EXCEEDED]).toContain(code);
    await waitFor(
      async () => (await sidecar.metric('dynamo_engine_request')) === 0 && (await sidecar.metric('dynamo_request_queue')) === 0,
      'both gauges at 0',
    );
    expect(await sidecar.metric('dynamo_sidecar_queue_cancelled_total')).toBeGreaterThan(0);
  });

  it('times out a queued call itself, without a client-side deadline, and never sends it upstream', async () => {
    const held = Array.from({ length: 8 }, (_, i) => hold(client, `h${i}`));
    await waitFor(() => engine.held === 8, 'eight held calls');
    const before = await sidecar.metric('dynamo_sidecar_queue_deadline_exceeded_total');
    // A raw HTTP/2 request: grpc-timeout on the wire, but no client that would cancel by itself.
    const { session, stream } = rawCall(sidecar.address, `${TEST_ENGINE_PATH}/Hold`, { 'grpc-timeout': '150m', 'x-tag': 'raw' }, EMPTY);
    const started = Date.now();
    const headers = await new Promise<Record<string, unknown>>((resolve) => stream.on('response', (h) => resolve(h)));
    const waited = Date.now() - started;
    session.close();
    expect(headers['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(String(headers['grpc-message'])).toMatch(/^Deadline exceeded while queued in the sidecar/);
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(await sidecar.metric('dynamo_sidecar_queue_deadline_exceeded_total')).toBe(before + 1);
    expect(engine.headerArrivals.filter((t) => !t.startsWith('h'))).toEqual([]);
    engine.releaseHeld();
    await Promise.all(held);
  });

  it('ends a call whose deadline passes inside the engine with DEADLINE_EXCEEDED and frees its slot', async () => {
    const { session, stream } = rawCall(sidecar.address, `${TEST_ENGINE_PATH}/Hold`, { 'grpc-timeout': '200m' }, EMPTY);
    const response = await new Promise<Record<string, unknown>>((resolve) => {
      stream.on('response', (headers) => (headers['grpc-status'] ? resolve(headers) : stream.on('trailers', resolve)));
    });
    session.close();
    expect(response['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(engine.arrivals).toHaveLength(1);
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 0 && engine.held === 0, 'the slot and the engine call to be freed');
  });

  it('answers a rejection as Trailers-Only: one HEADERS frame with END_STREAM and no body', async () => {
    const held = Array.from({ length: 12 }, (_, i) => unary(client, 'Hold', { tag: `t${i}` }));
    await waitFor(async () => engine.held === 8 && (await sidecar.metric('dynamo_request_queue')) === 4, 'engine and queue full');
    const { session, stream } = rawCall(sidecar.address, `${TEST_ENGINE_PATH}/Hold`, {}, EMPTY);
    const [headers, flags] = await new Promise<[Record<string, unknown>, number]>((resolve) => stream.on('response', (h, f) => resolve([h, f])));
    let bodyBytes = 0;
    stream.on('data', (d: Buffer) => (bodyBytes += d.length));
    await new Promise((resolve) => stream.on('close', resolve));
    session.close();
    expect(flags & constants.NGHTTP2_FLAG_END_STREAM).toBeTruthy();
    expect(headers[':status']).toBe(200);
    expect(headers['grpc-status']).toBe('8');
    expect(headers['grpc-message']).toBe(OVERLOADED);
    expect(headers['grpc-retry-pushback-ms']).toBe('250');
    expect(bodyBytes).toBe(0);
    engine.releaseHeld();
    await waitFor(() => engine.held === 4, 'the queued calls to reach the engine');
    engine.releaseHeld();
    await Promise.all(held);
  });
});

describe('with admission off (no limit set)', () => {
  it('never rejects or queues the same 2,000-call burst', async () => {
    // One client connection carries the whole burst: allow it more streams than the default 1,000.
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--max-concurrent-streams', '4096']);
    const client = testEngineClient(sidecar.address);
    try {
      expect(sidecar.startupLine).toContain('admission off');
      const calls = Array.from({ length: 2000 }, (_, i) => unary(client, 'Hold', { tag: String(i) }));
      await waitFor(() => engine.held === 2000, 'all 2,000 calls in the engine', 30_000);
      expect(await sidecar.metric('dynamo_engine_request')).toBe(2000);
      expect(await sidecar.metric('dynamo_request_queue')).toBe(0);
      engine.releaseHeld();
      const outcomes = await Promise.all(calls);
      expect(outcomes.every((o) => o.code === grpc.status.OK)).toBe(true);
      expect(await sidecar.metric('dynamo_rejection_request_total')).toBe(0);
    } finally {
      client.close();
      await sidecar.stop();
    }
  });
});
