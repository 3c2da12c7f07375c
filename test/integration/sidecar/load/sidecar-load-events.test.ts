/**
 * End to end load events (docs/architecture.md, "Load events"): the real sidecar process, a real
 * nats-server, the simulated engine (in process) and the load client. What a Dynamo router
 * would see on the event plane is checked against what the engine and the clients see.
 */
import { promtoolCheckMetrics } from '../../../support/promtool.js';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { startSimulatedEngine, type EngineOptions, type RunningEngine } from '../../../../src/tools/engine/index.js';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { loadSubject } from '../../../../src/protocol/load-event.js';
import { runLoad } from '../../../../src/tools/load/run.js';
import { startNatsServer, type NatsServerHandle } from '../../../support/nats-server.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, generate, tokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';
import { runCleanups } from '../../../support/cleanups.js';

const FIELDS = [
  'worker_id',
  'dp_rank',
  'active_decode_blocks',
  'active_prefill_tokens',
  'kv_used_blocks',
  'kv_total_blocks',
  'max_num_batched_tokens',
  'engine_request',
  'request_queue',
  'engine_request_limit',
  'overloaded',
  'overloaded_priority',
  'overloaded_tenants',
  'draining',
  'timestamp_ms',
  'sequence',
  'model',
  'grpc_address',
  'heartbeat_ms',
  'predicted_ttft_ms',
  'admit_now',
  'request_queue_limit',
].sort();

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
};

// Everything a test starts is stopped after it, last started first, even when it fails.
const cleanups: (() => unknown)[] = [];
afterEach(() => runCleanups(cleanups));

let nats: NatsServerHandle;
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  await nats?.stop();
});

interface Received {
  readonly subject: string;
  readonly event: LoadEvent;
  /** Date.now() at receipt, the same clock as the sidecar's timestamp_ms. */
  readonly at: number;
}

/** Collects every message on `subject` (wildcards allowed) from the moment the server knows the subscription. */
async function subscribe(url: string, subject: string): Promise<{ nc: NatsConnection; got: Received[] }> {
  const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 50, reconnectJitter: 0 });
  cleanups.push(() => nc.close());
  const got: Received[] = [];
  nc.subscribe(subject, { callback: (_err, msg) => void got.push({ subject: msg.subject, event: msg.json<LoadEvent>(), at: Date.now() }) });
  await nc.flush();
  return { nc, got };
}

async function engine(options: Partial<EngineOptions>): Promise<RunningEngine> {
  const e = await startSimulatedEngine(options);
  cleanups.push(() => e.close());
  return e;
}

async function sidecar(args: string[], env: Record<string, string> = {}): Promise<SidecarProcess> {
  const s = await startSidecarProcess(args, env);
  cleanups.push(() => s.stop('SIGKILL'));
  return s;
}

function client(address: string): grpc.Client {
  const c = engineClient(address);
  cleanups.push(() => c.close());
  return c;
}

let requestSeq = 0;
function request(promptTokens: number, maxTokens: number): Record<string, unknown> {
  return {
    request_id: `e2e-${++requestSeq}`,
    tokenized: { original_text: '', input_ids: tokens(promptTokens) },
    sampling_params: { max_tokens: maxTokens, n: 1 },
    stream: true,
  };
}

interface HeldCall {
  /** Date.now() when the first token reached the client. */
  readonly firstToken: Promise<number>;
  /** Final status code. */
  readonly done: Promise<grpc.status>;
  cancel(): void;
}

/** Starts a streaming Generate call and keeps it open until it ends or cancel(). */
function startCall(c: grpc.Client, promptTokens: number, maxTokens: number): HeldCall {
  const fn = (c as unknown as Record<string, (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<GenerateResponseMessage>>)['Generate']!;
  const call = fn.call(c, request(promptTokens, maxTokens), new grpc.Metadata());
  let resolveFirst!: (at: number) => void;
  const firstToken = new Promise<number>((r) => (resolveFirst = r));
  call.on('data', (m: GenerateResponseMessage) => {
    if (m.chunk && m.chunk.token_ids.length > 0) resolveFirst(Date.now());
  });
  call.on('error', () => {});
  const done = new Promise<grpc.status>((r) => call.on('status', (s: grpc.StatusObject) => r(s.code)));
  cleanups.push(() => call.cancel());
  return { firstToken, done, cancel: () => call.cancel() };
}

/** KV blocks in use per the engine's own /metrics: round(vllm:kv_cache_usage_perc * num_gpu_blocks). */
async function engineKvUsedBlocks(e: RunningEngine): Promise<{ used: number; total: number }> {
  const text = await (await fetch(e.metricsUrl, { signal: AbortSignal.timeout(5000) })).text();
  const perc = Number(/^vllm:kv_cache_usage_perc\{[^}]*\} (\S+)$/m.exec(text)?.[1]);
  const total = Number(/^vllm:cache_config_info\{[^}]*num_gpu_blocks="(\d+)"/m.exec(text)?.[1]);
  return { used: Math.round(perc * total), total };
}

interface LoadState {
  subject: string;
  upstream_reachable: boolean;
  ranks: LoadEvent[];
}

async function loadState(s: SidecarProcess): Promise<LoadState> {
  const res = await s.get('/load');
  expect(res.status).toBe(200);
  return JSON.parse(res.body) as LoadState;
}

function expectWellFormed(e: LoadEvent): void {
  expect(Object.keys(e).sort()).toEqual(FIELDS);
  for (const k of [
    'worker_id',
    'dp_rank',
    'active_decode_blocks',
    'active_prefill_tokens',
    'engine_request',
    'request_queue',
    'timestamp_ms',
    'sequence',
  ] as const) {
    expect(Number.isInteger(e[k]) && e[k] >= 0, `${k}=${e[k]}`).toBe(true);
  }
  for (const k of ['kv_used_blocks', 'kv_total_blocks', 'max_num_batched_tokens', 'engine_request_limit'] as const) {
    expect(e[k] === null || (Number.isInteger(e[k]) && e[k] >= 0), `${k}=${e[k]}`).toBe(true);
  }
  expect(typeof e.overloaded).toBe('boolean');
  // For whom, while overloaded: an int32 priority or null (every one), a list of tenants or null (every one).
  expect(e.overloaded_priority === null || Number.isInteger(e.overloaded_priority), `overloaded_priority=${e.overloaded_priority}`).toBe(true);
  expect(e.overloaded_tenants === null || (Array.isArray(e.overloaded_tenants) && e.overloaded_tenants.every((t) => typeof t === 'string'))).toBe(true);
  if (!e.overloaded) expect([e.overloaded_priority, e.overloaded_tenants]).toEqual([null, null]);
  expect(typeof e.draining).toBe('boolean');
  expect(e.model === null || (typeof e.model === 'string' && e.model !== ''), `model=${e.model}`).toBe(true);
  expect(e.grpc_address).toMatch(/^127\.0\.0\.1:[1-9]\d*$/); // the tests listen on 127.0.0.1:0
  expect(Number.isInteger(e.heartbeat_ms) && e.heartbeat_ms > 0, `heartbeat_ms=${e.heartbeat_ms}`).toBe(true);
  expect(e.predicted_ttft_ms === null || (Number.isInteger(e.predicted_ttft_ms) && e.predicted_ttft_ms >= 0), `predicted_ttft_ms=${e.predicted_ttft_ms}`).toBe(
    true,
  );
}

const lastOf = (got: Received[]): Received | undefined => got[got.length - 1];

/**
 * A TCP relay between the sidecar and nats-server: the broker is really killed and restarted,
 * the relay only lets the test decide when the sidecar may reconnect (after the test's own
 * subscriber is back), so "the first event after reconnection" is never lost to a race.
 */
async function natsRelay(target: NatsServerHandle): Promise<{ url: string; open: boolean; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const state = { open: true };
  const server: Server = createServer((downstream) => {
    sockets.add(downstream);
    downstream.on('close', () => sockets.delete(downstream));
    downstream.on('error', () => {});
    if (!state.open) return void downstream.destroy();
    const upstream = createConnection({ host: '127.0.0.1', port: target.port });
    sockets.add(upstream);
    upstream.on('close', () => {
      sockets.delete(upstream);
      downstream.destroy();
    });
    upstream.on('error', () => {});
    downstream.on('close', () => upstream.destroy());
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const relay = {
    url: `nats://127.0.0.1:${port}`,
    get open() {
      return state.open;
    },
    set open(v: boolean) {
      state.open = v;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
  cleanups.push(() => relay.close());
  return relay;
}

describe('sidecar load events end to end (real sidecar, nats-server, simulated engine)', () => {
  it('publishes every field on the escaped subject while load flows; prefill and KV usage track the engine; metrics pass promtool', async () => {
    const e = await engine({ numGpuBlocks: 1024, blockSize: 16, prefillTokensPerS: 4000, decodeStepMs: 20, maxNumBatchedTokens: 8192 });
    const subject = 'namespace.my%2Ens.component.worker.endpoint.generate.kv_metrics';
    expect(loadSubject('my.ns', 'worker', 'generate')).toBe(subject);
    const { got } = await subscribe(nats.url, '>'); // everything, to see which subjects are used
    const s = await sidecar(
      [
        ...['--upstream', e.address, '--engine-request-limit', '8'],
        ...['--engine-metrics-url', e.metricsUrl, '--scrape-interval-ms', '100', '--kv-total-blocks', '999', '--max-num-batched-tokens', '8192'],
        ...['--nats-url', nats.url, '--namespace', 'my.ns', '--component', 'worker', '--endpoint', 'generate'],
        ...['--load-heartbeat-ms', '200', '--worker-id', '4242'],
      ],
      { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '8' },
    );
    const mine = (): Received[] => got.filter((r) => r.event.worker_id === 4242);
    // Connected, and the scrape is fresh: the engine's block count beats --kv-total-blocks.
    await waitFor(() => mine().some((r) => r.event.kv_total_blocks === 1024 && r.event.kv_used_blocks === 0), 'first fresh event', 10_000);
    expect((await loadState(s)).subject).toBe(subject);

    // Prefill: a 1000-token prompt at 4000 tokens/s prefills for ~250 ms before its first token.
    const c = client(s.address);
    const mark = mine().length;
    const call = startCall(c, 1000, 20);
    const firstTokenAt = await call.firstToken;
    expect(await call.done).toBe(grpc.status.OK);
    // Events arrive in the order they were published: once one after the call's end is here, so is every one during it.
    await waitFor(() => {
      const since = mine().slice(mark);
      const callSeen = since.findIndex((r) => r.event.engine_request === 1);
      return callSeen >= 0 && since.slice(callSeen).some((r) => r.event.engine_request === 0);
    }, 'an event after the call ended');
    const during = mine().slice(mark);
    const prefilling = during.find((r) => r.event.active_prefill_tokens === 1000 && r.event.engine_request === 1);
    expect(prefilling, 'an event with the prompt in prefill').toBeDefined();
    expect(prefilling!.at).toBeLessThan(firstTokenAt);
    const decoding = during.find((r) => r.at >= prefilling!.at && r.event.active_prefill_tokens === 0 && r.event.engine_request === 1);
    expect(decoding, 'an event with prefill done while the call decodes').toBeDefined();
    expect(decoding!.event.active_decode_blocks).toBe(Math.ceil(1000 / 16));
    expect(decoding!.at - firstTokenAt).toBeLessThan(500);
    // No event received well after the first token still counts the prompt as prefilling
    // (generous margin: an event built just before the first token passed may be read later).
    expect(during.filter((r) => r.at > firstTokenAt + 300 && r.event.active_prefill_tokens > 0)).toEqual([]);

    // The load client through the sidecar: every event well formed, the numbers move.
    const loadMark = mine().length;
    const summary = await runLoad({
      target: s.address,
      concurrency: 4,
      count: 24,
      promptTokens: { min: 64, max: 256 },
      maxTokens: { min: 8, max: 24 },
      graceS: 20,
    });
    expect(summary.completed).toBe(24);
    expect(summary.rejected).toBe(0);
    const underLoad = mine()
      .slice(loadMark)
      .map((r) => r.event);
    expect(underLoad.some((ev) => ev.engine_request >= 2)).toBe(true);
    expect(underLoad.some((ev) => ev.active_prefill_tokens > 0)).toBe(true);
    expect(underLoad.some((ev) => ev.active_decode_blocks > 0)).toBe(true);
    expect(underLoad.some((ev) => (ev.kv_used_blocks ?? 0) > 0)).toBe(true);

    // KV used blocks from the scrape: at a quiescent moment (three calls decoding, between block
    // boundaries) the latest event, /load and the engine's own metrics agree.
    const held = [startCall(c, 600, 80), startCall(c, 600, 80), startCall(c, 600, 80)];
    await Promise.all(held.map((h) => h.firstToken));
    let agreed: { used: number; event: number | null; load: number | null } | undefined;
    await waitFor(
      async () => {
        const before = e.stats().usedBlocks;
        const fromMetrics = await engineKvUsedBlocks(e);
        const load = (await loadState(s)).ranks[0]!.kv_used_blocks;
        const event = lastOf(mine())!.event.kv_used_blocks;
        const quiescent = before === e.stats().usedBlocks && before === fromMetrics.used;
        if (quiescent && before > 0 && event === before && load === before) agreed = { used: before, event, load };
        return agreed !== undefined;
      },
      'kv_used_blocks in the event and /load to match the engine',
      3000,
    );
    // 3 calls of 600 prompt tokens plus a few output tokens each.
    expect(agreed!.used).toBeGreaterThanOrEqual(3 * Math.ceil(600 / 16));
    expect(agreed!.used).toBeLessThanOrEqual(3 * Math.ceil((600 + 80) / 16));
    // And within a small tolerance at every sample while they run (a sample right after a
    // scrape that timed out on a busy machine is null: stale numbers are withheld by design).
    let compared = 0;
    for (let i = 0; i < 6; i++) {
      const { used, total } = await engineKvUsedBlocks(e);
      const ev = lastOf(mine())!.event;
      expect(ev.kv_total_blocks).toBe(total);
      if (ev.kv_used_blocks !== null) {
        compared++;
        expect(Math.abs(ev.kv_used_blocks - used)).toBeLessThanOrEqual(3);
      }
      await sleep(60);
    }
    expect(compared).toBeGreaterThanOrEqual(3);
    for (const h of held) h.cancel();
    await waitFor(
      () => {
        const ev = lastOf(mine())!.event;
        return ev.kv_used_blocks === 0 && ev.engine_request === 0 && ev.active_prefill_tokens === 0 && ev.active_decode_blocks === 0;
      },
      'idle event after the held calls were cancelled',
      5000,
    );

    // GET /load serves the same state as the latest event (idle and quiescent now; retried only
    // in case a scrape flips kv_used_blocks between the two reads).
    await sleep(300);
    const withoutStamp = ({ sequence: _s, timestamp_ms: _t, ...rest }: LoadEvent): Omit<LoadEvent, 'sequence' | 'timestamp_ms'> => rest;
    let pair: [unknown, unknown] = [undefined, null];
    await waitFor(
      async () => {
        const served = withoutStamp((await loadState(s)).ranks[0]!);
        pair = [served, withoutStamp(lastOf(mine())!.event)];
        return isDeepStrictEqual(pair[0], pair[1]);
      },
      'GET /load to serve the state of the latest event',
      500,
      100,
    ).catch(() => undefined); // the expectation below shows the difference
    expect(pair[0]).toEqual(pair[1]);
    const latest = lastOf(mine())!.event;
    expect(latest).toMatchObject({
      worker_id: 4242,
      dp_rank: 0,
      kv_total_blocks: 1024,
      max_num_batched_tokens: 8192,
      engine_request_limit: 8,
      overloaded: false,
      draining: false,
    });
    // Who the worker is: the engine's model (GetModelInfo), the bound ingress port, the heartbeat.
    expect(latest).toMatchObject({ model: e.options.modelName, grpc_address: s.address, heartbeat_ms: 200 });

    // Metrics: present, sensible, and valid exposition per promtool.
    const text = await s.metrics();
    expect(await s.metric('dynamo_sidecar_nats_connected')).toBe(1);
    expect(await s.metric('dynamo_sidecar_load_events_published_total')).toBeGreaterThan(5);
    await waitFor(async () => (await s.metric('dynamo_sidecar_engine_scrape_stale')) === 0, 'a fresh scrape', 3000);
    expect(await s.metric('dynamo_component_total_blocks', 'dp_rank="0"')).toBe(1024);
    expect(await s.metric('dynamo_component_gpu_cache_usage_percent', 'dp_rank="0"')).toBe(0);
    expect(text).toMatch(/^dynamo_sidecar_engine_kv_usage_ratio\{dp_rank="0"\} /m);
    expect(text).toMatch(/^dynamo_sidecar_load_publish_failures_total /m);
    expect(text).toMatch(/^dynamo_sidecar_engine_scrape_errors_total /m);
    const promtool = await promtoolCheckMetrics(text);
    expect(promtool, promtool.output).toMatchObject({ code: 0 });

    // Every message came on exactly the escaped subject, every event is well formed, and the
    // sequence rises by one per published event.
    const events = mine();
    expect(new Set(events.map((r) => r.subject))).toEqual(new Set([subject]));
    for (const r of events) expectWellFormed(r.event);
    // Once calls have had their first tokens, the sidecar predicts the next one's.
    expect(events.some((r) => (r.event.predicted_ttft_ms ?? 0) > 0)).toBe(true);
    const seqs = events.map((r) => r.event.sequence);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));

    // Publish-to-receive latency is measured by bench/nats-outage.ts.
    console.log(
      `[sidecar-load-events] ${events.length} events; sample: ${JSON.stringify(underLoad.find((ev) => ev.active_prefill_tokens > 0 && ev.active_decode_blocks > 0 && (ev.kv_used_blocks ?? 0) > 0) ?? latest)}`,
    );

    // SIGTERM: the drain is announced before the sidecar exits.
    expect(await s.stop('SIGTERM')).toBe(0);
    await waitFor(() => mine().some((r) => r.event.draining), 'a draining event', 3000);
  });

  it('keeps publishing while idle, and shows overloaded during a rejecting burst and not busy within one heartbeat of the drain', async () => {
    const e = await engine({ decodeStepMs: 20 });
    const subject = loadSubject('dynamo', 'backend', 'generate');
    const { got } = await subscribe(nats.url, subject);
    const s = await sidecar(
      ['--upstream', e.address, '--engine-request-limit', '2', '--nats-url', nats.url, '--load-heartbeat-ms', '200', '--worker-id', '7'],
      {
        DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2',
      },
    );
    await waitFor(() => got.length > 0, 'first event', 10_000);

    // Idle: a heartbeat event every ~200 ms, sequence rising by one.
    const idleFrom = got.length;
    await sleep(1300);
    const idle = got.slice(idleFrom);
    expect(idle.length).toBeGreaterThanOrEqual(4);
    expect(idle.length).toBeLessThanOrEqual(10);
    const seqs = idle.map((r) => r.event.sequence);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    const gaps = idle.slice(1).map((r, i) => r.at - idle[i]!.at);
    expect(median(gaps)).toBeGreaterThan(120);
    expect(median(gaps)).toBeLessThan(400);
    for (const r of idle) expect(r.event).toMatchObject({ engine_request: 0, request_queue: 0, overloaded: false, engine_request_limit: 2 });

    // A burst far beyond N=2, Q=2: rejections, and overloaded events while it lasts.
    const burstFrom = got.length;
    const summary = await runLoad({
      target: s.address,
      concurrency: 30,
      count: 150,
      promptTokens: { min: 16, max: 16 },
      maxTokens: { min: 5, max: 5 },
      graceS: 20,
    });
    const drainedAt = Date.now();
    expect(summary.rejected).toBeGreaterThan(0);
    expect(summary.completed).toBeGreaterThan(0);
    const burst = got.slice(burstFrom);
    const firstBusy = burst.findIndex((r) => r.event.overloaded);
    expect(firstBusy, 'an overloaded event during the burst').toBeGreaterThanOrEqual(0);
    expect(burst[firstBusy]!.at).toBeLessThanOrEqual(drainedAt);

    // Within one heartbeat (plus scheduling slack) of the drain: not busy, and it stays so.
    await waitFor(
      () =>
        got
          .slice(burstFrom + firstBusy)
          .some((r) => !r.event.overloaded && r.event.engine_request === 0 && r.event.request_queue === 0 && r.at >= drainedAt - 50),
      'a non-busy event after the drain',
      2000,
    );
    const calm = got
      .slice(burstFrom + firstBusy)
      .find((r) => !r.event.overloaded && r.event.engine_request === 0 && r.event.request_queue === 0 && r.at >= drainedAt - 50)!;
    expect(calm.at - drainedAt).toBeLessThan(200 + 300);
    const calmIndex = got.indexOf(calm);
    await sleep(700);
    const after = got.slice(calmIndex);
    expect(after.length).toBeGreaterThanOrEqual(3); // heartbeats went on
    // ... and the accounting of the calls admitted from the queue was closed too.
    const idleState = { overloaded: false, engine_request: 0, request_queue: 0, active_prefill_tokens: 0, active_decode_blocks: 0 };
    for (const r of after) expect(r.event).toMatchObject(idleState);
    expect((await loadState(s)).ranks[0]).toMatchObject(idleState);
  });

  it('publishes at once on a rejection, long before the next heartbeat', async () => {
    const e = await engine({ decodeStepMs: 20 });
    const subject = loadSubject('dynamo', 'reject', 'generate');
    const { got } = await subscribe(nats.url, subject);
    const s = await sidecar(
      ['--upstream', e.address, '--engine-request-limit', '1', '--nats-url', nats.url, '--component', 'reject', '--load-heartbeat-ms', '5000'],
      {
        DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2',
      },
    );
    await waitFor(() => got.length > 0, 'first event', 10_000);
    const c = client(s.address);
    // Fill the gate: one call in the engine, two queued (they last ~4 s).
    const held = [startCall(c, 16, 200), startCall(c, 16, 200), startCall(c, 16, 200)];
    await held[0]!.firstToken;
    await waitFor(() => lastOf(got)!.event.request_queue === 2, 'the full gate in an event', 3000);
    expect(lastOf(got)!.event).toMatchObject({ engine_request: 1, request_queue: 2, overloaded: true });
    await sleep(300); // quiet: no change, and the next heartbeat is seconds away
    const quietCount = got.length;
    const lastSeq = lastOf(got)!.event.sequence;

    const rejected = await generate(c, request(16, 1));
    const rejectedAt = Date.now();
    expect(rejected.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await waitFor(() => got.length > quietCount, 'an event after the rejection', 2000);
    const next = got[quietCount]!;
    expect(next.event.sequence).toBe(lastSeq + 1);
    expect(next.event).toMatchObject({ overloaded: true, engine_request: 1, request_queue: 2 });
    expect(next.at - rejectedAt).toBeLessThan(500);
    for (const h of held) h.cancel();
    await waitFor(() => lastOf(got)!.event.engine_request === 0 && !lastOf(got)!.event.overloaded, 'not busy after the cancels', 3000);
  });

  it('keeps serving while nats-server is down, drops events (counted) rather than queueing them, and publishes the current state first after it returns', async () => {
    const broker = await startNatsServer();
    cleanups.push(() => broker.stop());
    const relay = await natsRelay(broker);
    const e = await engine({ decodeStepMs: 2, prefillTokensPerS: 1_000_000 });
    const subject = loadSubject('dynamo', 'outage', 'generate');
    const before = await subscribe(broker.url, subject);
    const s = await sidecar(
      ['--upstream', e.address, '--engine-request-limit', '16', '--nats-url', relay.url, '--component', 'outage', '--load-heartbeat-ms', '200'],
      {
        DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '16',
      },
    );
    await waitFor(() => before.got.length >= 2, 'events before the outage', 10_000);
    const c = client(s.address);
    const load = { target: s.address, concurrency: 8, promptTokens: { min: 8, max: 64 }, maxTokens: { min: 2, max: 8 }, graceS: 10 } as const;

    // Outage: the broker is killed; nothing new reaches the sidecar until the test allows it.
    await before.nc.close();
    relay.open = false;
    await broker.stop();
    await waitFor(async () => (await s.metric('dynamo_sidecar_nats_connected')) === 0, 'nats_connected 0', 5000);
    const publishedAtOutage = await s.metric('dynamo_sidecar_load_events_published_total');
    const failuresAtOutage = await s.metric('dynamo_sidecar_load_publish_failures_total');
    const outage = await runLoad({ ...load, durationS: 2.5 });
    expect(outage.completed).toBeGreaterThan(50);
    expect(outage.rejected).toBe(0);
    expect(Object.keys(outage.errors)).toEqual([]);
    expect(await s.metric('dynamo_sidecar_nats_connected')).toBe(0);
    // Events are dropped (counted), not queued. What the outage costs in latency and memory is
    // measured by bench/nats-outage.ts.
    expect(await s.metric('dynamo_sidecar_load_events_published_total')).toBe(publishedAtOutage);
    expect(await s.metric('dynamo_sidecar_load_publish_failures_total')).toBeGreaterThan(failuresAtOutage);
    // GET /load shows the sequence of the last event handed to NATS; it must not move while
    // the broker is down (nothing is published, nothing is queued).
    const seqDuringOutage = (await loadState(s)).ranks[0]!.sequence;
    expect(seqDuringOutage).toBeGreaterThanOrEqual(Math.max(...before.got.map((r) => r.event.sequence)));

    // State at reconnection: three calls held in the engine.
    const held = [startCall(c, 32, 4000), startCall(c, 32, 4000), startCall(c, 32, 4000)];
    await Promise.all(held.map((h) => h.firstToken));
    expect((await loadState(s)).ranks[0]!.sequence).toBe(seqDuringOutage);
    await broker.restart();
    const afterSub = await subscribe(broker.url, subject);
    relay.open = true;
    await waitFor(() => afterSub.got.length > 0, 'the first event after reconnection', 10_000);
    const first = afterSub.got[0]!.event;
    expect(first.sequence).toBe(seqDuringOutage + 1);
    expect(first).toMatchObject({ engine_request: 3, request_queue: 0, overloaded: false });
    const served = (await loadState(s)).ranks[0]!;
    expect(served.engine_request).toBe(first.engine_request);
    expect(await s.metric('dynamo_sidecar_nats_connected')).toBe(1);
    await waitFor(() => afterSub.got.length >= 3, 'heartbeats resume', 3000);
    for (const h of held) h.cancel();
  });

  it('serves the same latest state at GET /load when NATS is not configured', async () => {
    const e = await engine({ decodeStepMs: 20 });
    const s = await sidecar(
      [
        '--upstream',
        e.address,
        '--engine-request-limit',
        '2',
        '--namespace',
        'my.ns',
        '--max-num-batched-tokens',
        '4096',
        '--kv-total-blocks',
        '512',
        '--worker-id',
        '99',
        // No KV source: kv_total_blocks is the flag's, kv_used_blocks unknown (auto would ask GetLoads).
        '--engine-load-source',
        'traffic',
      ],
      {
        DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2',
      },
    );
    const idle = await loadState(s);
    expect(idle.subject).toBe('namespace.my%2Ens.component.backend.endpoint.generate.kv_metrics');
    expect(idle.upstream_reachable).toBe(true);
    expect(idle.ranks).toHaveLength(1);
    expectWellFormed(idle.ranks[0]!);
    expect(idle.ranks[0]).toMatchObject({
      worker_id: 99,
      dp_rank: 0,
      engine_request: 0,
      request_queue: 0,
      engine_request_limit: 2,
      kv_total_blocks: 512,
      kv_used_blocks: null,
      max_num_batched_tokens: 4096,
      overloaded: false,
      draining: false,
    });
    expect(await s.metrics()).not.toMatch(/^dynamo_sidecar_nats_connected/m);

    const c = client(s.address);
    const held = [startCall(c, 100, 200), startCall(c, 100, 200), startCall(c, 100, 200), startCall(c, 100, 200)];
    await Promise.all(held.slice(0, 2).map((h) => h.firstToken));
    await waitFor(async () => (await loadState(s)).ranks[0]!.request_queue === 2, 'two queued in /load', 3000);
    const rejected = await generate(c, request(16, 1));
    expect(rejected.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect((await loadState(s)).ranks[0]).toMatchObject({
      engine_request: 2,
      request_queue: 2,
      overloaded: true,
      active_prefill_tokens: 0,
      active_decode_blocks: 2 * Math.ceil(100 / 16),
    });
    for (const h of held) h.cancel();
    await waitFor(async () => (await loadState(s)).ranks[0]!.engine_request === 0, 'idle /load after the cancels', 3000);
    expect((await loadState(s)).ranks[0]).toMatchObject({
      engine_request: 0,
      request_queue: 0,
      overloaded: false,
      active_prefill_tokens: 0,
      active_decode_blocks: 0,
    });
  });
});
