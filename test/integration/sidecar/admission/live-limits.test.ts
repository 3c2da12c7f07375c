/**
 * Live admission changes end to end: a real sidecar process in front of the in-process test
 * engine, whose concurrency the test watches from inside. N changed under load through the admin
 * API (8 -> 4 -> 12 with 30 callers), Q lowered below the queue, admission turned off and on,
 * the queue timeout, and adaptive pushback on a real refusal.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { runCleanups } from '../../../support/cleanups.js';
import { testEngineClient, unary, type TestEngineClient, type UnaryOutcome } from '../../../support/grpc-client.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type EchoReply, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

const TOKEN = 'live-limits-token-8d1e0b6c';
const OVERLOADED = 'Server overloaded: worker at capacity';

async function put(sidecar: SidecarProcess, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`http://127.0.0.1:${sidecar.systemPort}/admission`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(answer)).toBe(200);
  return answer;
}

/** A Hold call whose tag also travels as `x-tag`, so the engine records the order HEADERS reached it. */
function hold(client: TestEngineClient, tag: string, deadlineMs?: number): Promise<UnaryOutcome<EchoReply>> {
  const metadata = new grpc.Metadata();
  metadata.set('x-tag', tag);
  return unary<EchoReply>(client, 'Hold', { tag }, { metadata, deadlineMs });
}

const cleanups: (() => unknown)[] = [];
let engine: TestEngine;

beforeAll(async () => {
  engine = await startTestEngine();
  cleanups.push(() => engine.close());
});

afterAll(async () => {
  await runCleanups(cleanups);
});

describe('N changed under load through the admin API (30 callers, Q = 32)', () => {
  let sidecar: SidecarProcess;
  let client: TestEngineClient;

  beforeAll(async () => {
    sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '8'], {
      DYN_SIDECAR_ADMIN_TOKEN: TOKEN,
      DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '32',
    });
    client = testEngineClient(sidecar.address);
    cleanups.push(
      () => sidecar.stop(),
      () => client.close(),
    );
  });

  it('8 -> 4 -> 12: no call cut or failed; after the lowering nothing enters an engine holding >= 4; a raise admits the oldest waiters at once', async () => {
    const CALLERS = 30;
    const random = mulberry32(20261203);
    const outcomes: UnaryOutcome<EchoReply>[] = [];
    let nextTag = 0;
    let stopped = false;
    // Each caller sends its next call as soon as the last one ends: 30 calls outstanding at all times.
    const lane = async (): Promise<void> => {
      while (!stopped) outcomes.push(await hold(client, String(nextTag++)));
    };
    // Calls the engine held at the moment each HEADERS reached it, by phase.
    let phase = 'N=8';
    const heldAtArrival: { phase: string; tag: number; held: number }[] = [];
    engine.onHeaderArrival = (tag) => heldAtArrival.push({ phase, tag: Number(tag), held: engine.held });
    cleanups.push(() => (engine.onHeaderArrival = undefined));
    engine.resetStats();
    const lanes = Array.from({ length: CALLERS }, lane);
    let releasing = true;
    // Deliberate pacing: the engine finishes one or two calls every 5 ms while `releasing`.
    const releaser = setInterval(() => releasing && engine.releaseHeld(1 + Math.floor(random() * 2)), 5);
    cleanups.push(() => clearInterval(releaser));
    const runFor = async (calls: number, what: string): Promise<void> => {
      const target = outcomes.length + calls;
      await waitFor(() => outcomes.length >= target, what, 30_000);
    };
    const settle = async (inEngine: number): Promise<void> => {
      releasing = false;
      await waitFor(
        async () => engine.held === inEngine && (await sidecar.metric('dynamo_request_queue')) === CALLERS - inEngine,
        `${inEngine} calls in the engine and ${CALLERS - inEngine} queued`,
      );
    };

    await runFor(150, '150 calls at N=8');
    expect(engine.maxActive).toBeLessThanOrEqual(8);

    // Lower N to 4 with 8 calls in the engine.
    await settle(8);
    phase = 'N=4';
    await put(sidecar, { engine_request_limit: 4 });
    expect(engine.held).toBe(8); // nothing in the engine is cut
    releasing = true;
    await waitFor(() => engine.held <= 4, 'the engine to drain below the new N');
    engine.resetStats(); // from here on, the engine must never hold more than 4
    await runFor(150, '150 calls at N=4');
    expect(engine.maxActive).toBeLessThanOrEqual(4);

    // Raise N to 12 with 4 in the engine and 26 queued: the 8 oldest waiters go in at once.
    await settle(4);
    const queuedTags = (): number[] => {
      const done = new Set(outcomes.map((o) => Number(o.value?.tag)));
      const inEngine = new Set(engine.heldTags.map(Number));
      return Array.from({ length: nextTag }, (_, tag) => tag).filter((tag) => !done.has(tag) && !inEngine.has(tag));
    };
    const waitingBefore = queuedTags();
    expect(waitingBefore).toHaveLength(26);
    const seen = heldAtArrival.length;
    phase = 'N=12';
    await put(sidecar, { engine_request_limit: 12 });
    await waitFor(() => engine.held === 12, 'eight queued calls in the engine at once', 5000);
    expect(heldAtArrival.slice(seen).map((a) => a.tag)).toEqual(waitingBefore.slice(0, 8));
    releasing = true;
    await runFor(150, '150 calls at N=12');
    expect(engine.maxActive).toBeLessThanOrEqual(12);

    stopped = true;
    releasing = false;
    await waitFor(() => (engine.releaseHeld(), outcomes.length === nextTag), 'every call to end', 20_000);
    await Promise.all(lanes);

    // No call was dropped or failed by the changes, and nothing was refused (N + Q >= 30 throughout).
    expect(outcomes.filter((o) => o.code !== grpc.status.OK)).toEqual([]);
    expect(await sidecar.metric('dynamo_rejection_request_total')).toBe(0);
    // After the lowering, a call reached the engine only while it held fewer than 4 (the sidecar
    // counts a call until its answer is back, so the engine's own count is never higher).
    const afterLowering = heldAtArrival.filter((a) => a.phase === 'N=4');
    expect(afterLowering.length).toBeGreaterThan(100);
    for (const arrival of afterLowering) expect(arrival.held, `call ${arrival.tag} at N=4`).toBeLessThan(4);
    // FIFO end to end: one client connection, so calls reached the engine in the order they were sent.
    const order = heldAtArrival.map((a) => a.tag);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(await sidecar.metric('dynamo_sidecar_admission_changes_total', 'source="api"')).toBe(2);
  });
});

describe('Q, admission off and on, queue timeout, adaptive pushback', () => {
  let sidecar: SidecarProcess;
  let client: TestEngineClient;

  beforeAll(async () => {
    sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '2'], {
      DYN_SIDECAR_ADMIN_TOKEN: TOKEN,
      DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '8',
    });
    client = testEngineClient(sidecar.address);
    cleanups.push(
      () => sidecar.stop(),
      () => client.close(),
    );
  });

  afterEach(async () => {
    await waitFor(
      async () => (engine.releaseHeld(), (await sidecar.metric('dynamo_engine_request')) === 0 && (await sidecar.metric('dynamo_request_queue')) === 0),
      'gauges at 0',
    );
    await put(sidecar, { engine_request_limit: 2, request_queue_limit: 8, request_queue_timeout_ms: 0, retry_pushback_mode: 'fixed' });
    engine.resetStats();
  });

  /** Sends `count` calls and waits until the sidecar holds `total` (in the engine or queued). */
  const fill = async (count: number, prefix: string, total = count): Promise<Promise<UnaryOutcome<EchoReply>>[]> => {
    const calls = Array.from({ length: count }, (_, i) => hold(client, `${prefix}${i}`));
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) + (await sidecar.metric('dynamo_request_queue')) === total, `${total} calls in`);
    return calls;
  };

  it('lowering Q below the queue drops no waiter and refuses newcomers until the queue is below Q', async () => {
    const calls = await fill(10, 'q'); // 2 in the engine, 8 queued
    await put(sidecar, { request_queue_limit: 3 });
    expect(await sidecar.metric('dynamo_request_queue')).toBe(8);
    const refused = await hold(client, 'late');
    expect([refused.code, refused.details]).toEqual([grpc.status.RESOURCE_EXHAUSTED, OVERLOADED]);
    // One call ends at a time: while 3 or more wait, newcomers are still refused.
    for (let waiting = 8; waiting > 2; waiting--) {
      engine.releaseHeld(1);
      await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === waiting - 1, `${waiting - 1} waiting`);
      if (waiting - 1 >= 3) expect((await hold(client, `refused-${waiting}`)).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    }
    // 2 wait: the queue is below Q = 3 again and takes a newcomer.
    const admittedLater = hold(client, 'later');
    await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 3, 'the newcomer queued');
    await waitFor(() => (engine.releaseHeld(), engine.headerArrivals.includes('later')), 'the newcomer in the engine');
    engine.releaseHeld();
    for (const outcome of await Promise.all([...calls, admittedLater])) expect(outcome.code).toBe(grpc.status.OK);
    expect(engine.headerArrivals.filter((t) => t.startsWith('q'))).toEqual(Array.from({ length: 10 }, (_, i) => `q${i}`));
  });

  it('turning admission off admits every queued call at once; on again with more in the engine than N admits nobody until below N', async () => {
    const calls = await fill(10, 'o');
    const answer = await put(sidecar, { engine_request_limit: null });
    expect(answer['engine_request_limit']).toBeNull();
    await waitFor(() => engine.held === 10, 'all ten calls in the engine');
    expect(await sidecar.metric('dynamo_sidecar_engine_request_limit')).toBe(0);
    const more = await fill(3, 'm', 13); // 3 more, none queued
    expect(await sidecar.metric('dynamo_request_queue')).toBe(0);
    await put(sidecar, { engine_request_limit: 4 });
    const queued = hold(client, 'after-on');
    await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 1, 'a newcomer queued behind 13 calls in the engine');
    engine.releaseHeld(9); // 4 left in the engine: still no free slot
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 4, 'the sidecar to see 4 in the engine');
    expect(engine.headerArrivals).not.toContain('after-on');
    engine.releaseHeld(1);
    await waitFor(() => engine.headerArrivals.includes('after-on'), 'the newcomer admitted once below N');
    engine.releaseHeld();
    for (const outcome of await Promise.all([...calls, ...more, queued])) expect(outcome.code).toBe(grpc.status.OK);
  });

  it('answers a call queued past the queue timeout RESOURCE_EXHAUSTED with the pushback, counted apart; a shorter deadline still wins', async () => {
    await put(sidecar, { request_queue_timeout_ms: 300 });
    const calls = await fill(2, 't');
    const before = await sidecar.metric('dynamo_rejection_request_total');
    const started = Date.now();
    const timedOut = await hold(client, 'no-deadline');
    const waited = Date.now() - started;
    expect([timedOut.code, timedOut.details]).toEqual([grpc.status.RESOURCE_EXHAUSTED, OVERLOADED]);
    expect(timedOut.trailers!.get('grpc-retry-pushback-ms')).toEqual(['250']);
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(5000);
    expect(await sidecar.metric('dynamo_sidecar_rejections_total', 'reason="queue_timeout"')).toBe(1);
    expect(await sidecar.metric('dynamo_rejection_request_total')).toBe(before + 1);
    const deadline = await hold(client, 'short-deadline', 100);
    expect(deadline.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(await sidecar.metric('dynamo_sidecar_rejections_total', 'reason="queue_timeout"')).toBe(1);
    expect(engine.headerArrivals).not.toContain('no-deadline');
    engine.releaseHeld();
    for (const outcome of await Promise.all(calls)) expect(outcome.code).toBe(grpc.status.OK);
  });

  it('adaptive pushback: a refusal carries an estimate within the bounds', async () => {
    await put(sidecar, { retry_pushback_mode: 'adaptive', retry_pushback_min_ms: 40, retry_pushback_max_ms: 5000, request_queue_limit: 2 });
    const calls = await fill(4, 'p');
    const refused = await hold(client, 'refused');
    expect(refused.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    const pushback = Number(refused.trailers!.get('grpc-retry-pushback-ms')[0]);
    expect(pushback).toBeGreaterThanOrEqual(40);
    expect(pushback).toBeLessThanOrEqual(5000);
    engine.releaseHeld();
    await waitFor(() => engine.held === 2, 'the queued calls in the engine');
    engine.releaseHeld();
    for (const outcome of await Promise.all(calls)) expect(outcome.code).toBe(grpc.status.OK);
  });
});
