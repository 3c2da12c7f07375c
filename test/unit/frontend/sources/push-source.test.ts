// The broker-less load source: one WorkerLoad.Watch stream per --worker address, against an in-process sidecar stand-in on port 0.
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WorkerCredentials } from '../../../../src/frontend/generate/worker-credentials.js';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { PushLoadSource, workerLoadClientCtor, type PushLoadSourceOptions } from '../../../../src/frontend/sources/push-source.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

type Watch = grpc.ServerWritableStream<object, { ranks: object[] }>;

let server: grpc.Server;
let address: string;
/** The Watch calls the stand-in received, and how many of them the client cancelled. */
interface Sidecar {
  readonly streams: Watch[];
  cancelled: number;
}
let sidecar: Sidecar;
let source: PushLoadSource | undefined;
let pool: WorkerPool;
let logger: RecordingLogger;
let applied: number;

beforeEach(async () => {
  // One record per server: a late event on the previous test's server must not count here.
  const seen: Sidecar = { streams: [], cancelled: 0 };
  sidecar = seen;
  server = new grpc.Server();
  server.addService(workerLoadClientCtor().service, {
    Watch: (call: Watch) => {
      seen.streams.push(call);
      call.on('cancelled', () => seen.cancelled++);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
  pool = new WorkerPool({ defaultHeartbeatMs: 60_000, leaseMs: 1000, maxWorkers: 2 });
  logger = recordingLogger();
  applied = 0;
});

afterEach(() => {
  source?.close();
  source = undefined;
  server.forceShutdown();
});

function start(extra: Partial<PushLoadSourceOptions> = {}): PushLoadSource {
  source = new PushLoadSource({ addresses: [address], pool, now: Date.now, logger, defaultHeartbeatMs: 60_000, onApplied: () => applied++, ...extra });
  source.start();
  return source;
}

const rank = (workerId: number, fields: object = {}) => ({ worker_id: workerId, dp_rank: 0, model: 'm', heartbeat_ms: 60_000, ...fields });
/** `count` ranks of one worker from `first` on. */
const ranks = (workerId: number, first: number, count: number) => Array.from({ length: count }, (_, i) => rank(workerId, { dp_rank: first + i }));
/** The per-worker rank cap the docs give (MAX_DP_RANKS), and the warning of its first refusals. */
const CAP = 1024;
const TOO_MANY_RANKS = 'ignoring dp ranks: more ranks than a worker may have';
const nthStream = (n: number) => waitFor(() => sidecar.streams.length >= n, `Watch stream ${n}`, 2000, 5);

describe('PushLoadSource', () => {
  it('applies each rank with the --worker address as where to route, whatever the sidecar advertises', async () => {
    const push = start();
    expect(push.connected).toBe(false);
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(11, { grpc_address: 'advertised:1', active_prefill_tokens: 5 })] });
    await waitFor(() => pool.get('11') !== undefined, 'the worker');
    expect(pool.get('11')).toMatchObject({ source: 'push', address, model: 'm', connected: true });
    expect(pool.get('11')!.ranks.get(0)!.report.activePrefillTokens).toBe(5);
    expect(push.stats).toEqual({ events: 1, invalid: 0, refused: 0, ranksRefused: 0 });
    expect(push.connected).toBe(true);
    expect(applied).toBe(1);
    expect(logger.find('worker appeared', 'info')).toHaveLength(1);
  });

  it('reads predicted_ttft_ms (field 18) through the real proto: absent is unknown, 0 stays 0, a value past any believable wait is unknown', async () => {
    const push = start();
    await nthStream(1);
    const prediction = (id: string) => pool.get(id)!.ranks.get(0)!.report.predictedTtftMs;
    sidecar.streams[0]!.write({ ranks: [rank(11, { predicted_ttft_ms: 120 })] });
    await waitFor(() => pool.get('11') !== undefined, 'the first update');
    expect(prediction('11')).toBe(120);
    // Each update is the whole sidecar: later values replace earlier ones, rank by rank.
    const cases: [object, number | undefined][] = [
      [{ predicted_ttft_ms: 0 }, 0],
      [{}, undefined],
      [{ predicted_ttft_ms: 2 ** 32 - 1 }, undefined],
      [{ predicted_ttft_ms: 3_600_000 }, 3_600_000],
    ];
    for (const [fields, expected] of cases) {
      const before = push.stats.events;
      sidecar.streams[0]!.write({ ranks: [rank(11, { active_prefill_tokens: 9, ...fields })] });
      await waitFor(() => push.stats.events > before, `the update ${JSON.stringify(fields)}`);
      expect(prediction('11'), JSON.stringify(fields)).toBe(expected);
      expect(pool.get('11')!.ranks.get(0)!.report.activePrefillTokens).toBe(9);
    }
    expect(push.stats.invalid).toBe(0);
  });

  it('skips a malformed rank, counting and logging it, and applies the others of the update', async () => {
    const push = start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(11, { grpc_address: 'not an address' }), rank(12, { dp_rank: 0 })] });
    await waitFor(() => push.stats.invalid === 1 && push.stats.events === 1, 'the update');
    expect(pool.get('12')).toBeDefined();
    expect(logger.find('ignoring a malformed load update', 'warn')[0]!.fields).toMatchObject({ address });
  });

  it('counts ranks of new workers beyond --max-workers as refused', async () => {
    const push = start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(1), rank(2), rank(3)] });
    await waitFor(() => push.stats.events + push.stats.refused === 3, 'the update');
    expect(push.stats).toEqual({ events: 2, invalid: 0, refused: 1, ranksRefused: 0 });
    expect(pool.size).toBe(2);
  });

  it('keeps the first 1,024 ranks of an update naming 20,000, counts the rest refused, and warns once however many such updates come', async () => {
    const push = start();
    await nthStream(1);
    const flood = { ranks: ranks(11, 0, 20_000) };
    sidecar.streams[0]!.write(flood);
    sidecar.streams[0]!.write(flood);
    await waitFor(() => applied === 2, 'both updates');
    expect(pool.get('11')!.ranks.size).toBe(CAP);
    expect(push.stats).toEqual({ events: 2 * CAP, invalid: 0, refused: 0, ranksRefused: 2 * (20_000 - CAP) });
    expect(logger.find(TOO_MANY_RANKS, 'warn')).toHaveLength(1);
    expect(logger.find(TOO_MANY_RANKS, 'warn')[0]!.fields).toMatchObject({ address, max_ranks: CAP });
  });

  it('refuses ranks beyond 1,024 spread over several updates, still routing the worker, with one warning', async () => {
    const push = start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: ranks(11, 0, CAP) });
    sidecar.streams[0]!.write({ ranks: ranks(11, CAP, 10) });
    sidecar.streams[0]!.write({ ranks: ranks(11, CAP + 10, 10) });
    await waitFor(() => applied === 3, 'the three updates');
    expect(pool.get('11')!.ranks.size).toBe(CAP);
    expect(push.stats).toMatchObject({ events: CAP, ranksRefused: 20 });
    expect(pool.routable(pool.get('11')!, Date.now())).toBe(true);
    expect(logger.find(TOO_MANY_RANKS, 'warn')).toHaveLength(1);
    expect(logger.find(TOO_MANY_RANKS, 'warn')[0]!.fields).toMatchObject({ address, worker_id: '11', max_ranks: CAP });
  });

  it('forgets an id its address no longer reports (the sidecar came back under a new worker_id)', async () => {
    start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(11)] });
    await waitFor(() => pool.get('11') !== undefined, 'the first id');
    sidecar.streams[0]!.write({ ranks: [rank(22)] });
    await waitFor(() => pool.get('22') !== undefined, 'the new id');
    expect(pool.get('11')).toBeUndefined();
    expect(logger.find('worker replaced: its address reports another worker_id now')[0]!.fields).toMatchObject({ worker_id: '11', now_reported: ['22'] });
  });

  it('keeps the workers it knows when an update reports no ranks', async () => {
    const push = start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(11)] });
    sidecar.streams[0]!.write({ ranks: [] });
    await waitFor(() => applied === 2, 'both updates');
    expect(pool.get('11')).toBeDefined();
    expect(push.stats.events).toBe(1);
  });

  it('makes the worker unroutable when the stream ends, reopens it, and routes again on the next update', async () => {
    const push = start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(11)] });
    await waitFor(() => pool.get('11') !== undefined, 'the worker');
    sidecar.streams[0]!.end();
    await waitFor(() => pool.get('11')!.connected === false, 'the worker disconnected');
    expect(pool.routable(pool.get('11')!, Date.now())).toBe(false);
    expect(push.connected).toBe(false);
    expect(logger.find('worker load stream lost: worker not routable until it is back', 'warn')[0]!.fields).toMatchObject({ address, reason: 'stream ended' });

    await nthStream(2);
    sidecar.streams[1]!.write({ ranks: [rank(11)] });
    await waitFor(() => pool.get('11')!.connected, 'the worker back');
    expect(pool.routable(pool.get('11')!, Date.now())).toBe(true);
    expect(logger.find('worker reachable again', 'info')).toHaveLength(1);
  });

  it('names the gRPC status of a failed stream, and logs the outage once however often reconnecting fails', async () => {
    start();
    await nthStream(1);
    sidecar.streams[0]!.write({ ranks: [rank(11)] });
    await waitFor(() => pool.get('11') !== undefined, 'the worker');
    sidecar.streams[0]!.emit('error', { code: grpc.status.UNAVAILABLE, details: 'going away' });
    await nthStream(2);
    const before = applied;
    sidecar.streams[1]!.end();
    // lost() tells the router (onApplied) on every loss, logged or not.
    await waitFor(() => applied === before + 1, 'the second loss', 2000, 5);
    const lost = logger.find('worker load stream lost: worker not routable until it is back');
    expect(lost).toHaveLength(1);
    expect(lost[0]!.fields['reason']).toBe('UNAVAILABLE: going away');
  });

  it('cancels and reopens a stream that stays open but sends nothing for 3 heartbeats', async () => {
    start();
    await nthStream(1);
    // The shortest heartbeat a sidecar can have: silence is judged after 3 x 10 ms.
    sidecar.streams[0]!.write({ ranks: [rank(11, { heartbeat_ms: 10 })] });
    await waitFor(() => pool.get('11') !== undefined, 'the worker');
    // The silence window is armed on each update with the heartbeat known so far: the next one arms 30 ms.
    sidecar.streams[0]!.write({ ranks: [rank(11, { heartbeat_ms: 10 })] });
    await waitFor(() => sidecar.cancelled === 1, 'the silent stream cancelled', 2000, 5);
    expect(pool.get('11')!.connected).toBe(false);
    expect(logger.find('worker load stream lost: worker not routable until it is back')[0]!.fields['reason']).toBe('no update for 3 heartbeats');
    await nthStream(2);
  });

  it("does not take a stall of its own event loop, longer than the silence window, for the sidecar's silence", async () => {
    start();
    await nthStream(1);
    // Heartbeat 50 ms: silence is judged after 150 ms. The stand-in keeps sending every 10 ms.
    sidecar.streams[0]!.write({ ranks: [rank(11, { heartbeat_ms: 50 })] });
    await waitFor(() => pool.get('11') !== undefined, 'the worker');
    const stream = sidecar.streams[0]!;
    const beat = setInterval(() => stream.write({ ranks: [rank(11, { heartbeat_ms: 50 })] }), 10);
    try {
      await waitFor(() => applied >= 3, 'the updates flowing');
      // The frontend's loop blocked for 500 ms, as tokenizing a huge prompt on it did.
      const until = performance.now() + 500;
      while (performance.now() < until);
      const before = applied;
      await waitFor(() => applied >= before + 5, 'updates read after the stall');
    } finally {
      clearInterval(beat);
    }
    expect(sidecar.cancelled).toBe(0);
    expect(pool.get('11')!.connected).toBe(true);
    expect(logger.find('worker load stream lost: worker not routable until it is back')).toEqual([]);
  });

  it('makes a new client with the reloaded TLS files for the next stream', async () => {
    let generation = 1;
    let channels = 0;
    const credentials = {
      get generation() {
        return generation;
      },
      channel: () => (channels++, { credentials: grpc.credentials.createInsecure(), options: {} }),
    } as unknown as WorkerCredentials;
    start({ credentials });
    await nthStream(1);
    expect(channels).toBe(1);
    generation = 2;
    sidecar.streams[0]!.end();
    await nthStream(2);
    expect(channels).toBe(2);
  });

  it('on close, cancels its stream and does not reconnect', async () => {
    const push = start();
    await nthStream(1);
    push.close();
    await waitFor(() => sidecar.cancelled === 1, 'the stream cancelled', 2000, 5);
    // A reconnection is only ever scheduled together with this line (the first loss of an outage).
    expect(logger.find('worker load stream lost: worker not routable until it is back')).toEqual([]);
    expect(applied).toBe(0);
    expect(sidecar.streams).toHaveLength(1);
  });
});
