/**
 * --event-format dynamo end to end: the real sidecar process publishes to a real nats-server what
 * Dynamo's NATS event plane carries (docs/wire-facts.md, "Dynamo"), read here with an independent
 * MessagePack decoder (msgpackr); and this project's own frontend NATS source, listening on the
 * same subject, ignores those envelopes as malformed without crashing or logging each one.
 */
import * as grpc from '@grpc/grpc-js';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Unpackr } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerPool } from '../../../../src/frontend/routing/worker-pool.js';
import { NatsLoadSource } from '../../../../src/frontend/sources/nats-source.js';
import { DP_RANK_HEADER, loadSubject, type LoadEvent } from '../../../../src/protocol/load-event.js';
import { startSimulatedEngine } from '../../../../src/tools/engine/index.js';
import { startNatsServer } from '../../../support/nats-server.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, tokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';
import { runCleanups } from '../../../support/cleanups.js';

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
const ENVELOPE_KEYS = ['payload', 'published_at', 'published_at_ns', 'publisher_id', 'sequence', 'topic'];
const ACTIVE_LOAD_KEYS = ['active_decode_blocks', 'active_prefill_tokens', 'dp_rank', 'kv_used_blocks', 'worker_id'];
/** Above 2^32, below 2^53: written as a MessagePack uint 64. */
const WORKER_ID = 2 ** 40 + 7;

interface Envelope {
  readonly publisher_id: number | bigint;
  readonly sequence: number | bigint;
  readonly published_at: number | bigint;
  readonly published_at_ns: number | bigint;
  readonly topic: string;
  readonly payload: Uint8Array;
}
interface Received {
  readonly subject: string;
  readonly envelope: Envelope;
  readonly load: Record<string, unknown>;
  /** Date.now() at receipt. */
  readonly at: number;
}

// Everything started is stopped at the end, last started first, even when a test fails.
const cleanups: (() => unknown)[] = [];
afterAll(() => runCleanups(cleanups));

let sidecar: SidecarProcess;
let got: Received[];
let frontendSource: NatsLoadSource;
let frontendPool: WorkerPool;
const frontendLogger = recordingLogger();
const subject = loadSubject('dynamo', 'backend', 'generate');

beforeAll(async () => {
  const nats = await startNatsServer();
  cleanups.push(() => nats.stop());

  // Subscribed before the sidecar starts, so every envelope it publishes is seen, from the first.
  const nc: NatsConnection = await connect({ servers: nats.url });
  cleanups.push(() => nc.close());
  got = [];
  nc.subscribe(subject, {
    callback: (_err, msg) => {
      const envelope = unpackr.unpack(msg.data) as Envelope;
      got.push({ subject: msg.subject, envelope, load: unpackr.unpack(envelope.payload) as Record<string, unknown>, at: Date.now() });
    },
  });
  await nc.flush();

  // This project's frontend, reading the same subject as it would in production.
  frontendPool = new WorkerPool({ defaultHeartbeatMs: 1000, leaseMs: 1000, maxWorkers: 100 });
  frontendSource = new NatsLoadSource({
    servers: [nats.url],
    namespace: 'dynamo',
    component: 'backend',
    endpoint: 'generate',
    pool: frontendPool,
    now: Date.now,
    logger: frontendLogger,
  });
  cleanups.push(() => frontendSource.close());
  frontendSource.start();
  await waitFor(() => frontendSource.connected, 'the frontend source to connect', 10_000);

  const engine = await startSimulatedEngine({ decodeStepMs: 20, dataParallelSize: 2 });
  cleanups.push(() => engine.close());
  sidecar = await startSidecarProcess([
    '--upstream',
    engine.address,
    '--nats-url',
    nats.url,
    '--event-format',
    'dynamo',
    '--worker-id',
    String(WORKER_ID),
    '--data-parallel-size',
    '2',
    '--load-heartbeat-ms',
    '100',
    // No KV source, so kv_used_blocks is null: the nil encoding is checked too.
    '--engine-load-source',
    'traffic',
  ]);
  cleanups.push(() => sidecar.stop('SIGKILL'));
  await waitFor(() => got.length >= 10, 'ten envelopes (five heartbeats of two ranks)', 10_000);
});

const asBig = (v: unknown): bigint => BigInt(v as number | bigint);
const isUnsignedInteger = (v: unknown): boolean => typeof v === 'bigint' || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);

describe('sidecar --event-format dynamo', () => {
  it('publishes Dynamo envelopes on the load subject, every field present with its type', () => {
    for (const r of got) {
      expect(r.subject).toBe(subject);
      expect(Object.keys(r.envelope).sort()).toEqual(ENVELOPE_KEYS);
      for (const key of ['publisher_id', 'sequence', 'published_at', 'published_at_ns'] as const) expect(isUnsignedInteger(r.envelope[key]), key).toBe(true);
      expect(r.envelope.topic).toBe('kv_metrics');
      expect(r.envelope.payload).toBeInstanceOf(Uint8Array);
      expect(asBig(r.envelope.published_at_ns)).toBe(asBig(r.envelope.published_at) * 1_000_000n);
      // Published at: a recent Unix time in ms, not later than its receipt.
      expect(Number(r.envelope.published_at)).toBeLessThanOrEqual(r.at);
      expect(Number(r.envelope.published_at)).toBeGreaterThan(r.at - 60_000);

      expect(Object.keys(r.load).sort()).toEqual(ACTIVE_LOAD_KEYS);
      expect(asBig(r.load['worker_id'])).toBe(BigInt(WORKER_ID));
      expect([0, 1]).toContain(r.load['dp_rank']);
      expect(isUnsignedInteger(r.load['active_decode_blocks'])).toBe(true);
      expect(isUnsignedInteger(r.load['active_prefill_tokens'])).toBe(true);
      // --engine-load-source traffic: no KV usage, nil.
      expect(r.load['kv_used_blocks']).toBeNull();
    }
    expect(new Set(got.map((r) => r.load['dp_rank']))).toEqual(new Set([0, 1]));
  });

  it('keeps one publisher_id and numbers the envelopes 0, 1, 2, ... (one per rank per publish)', () => {
    const snapshot = [...got];
    expect(new Set(snapshot.map((r) => asBig(r.envelope.publisher_id))).size).toBe(1);
    expect(asBig(snapshot[0]!.envelope.publisher_id)).toBeLessThan(2n ** 53n);
    expect(snapshot.map((r) => Number(r.envelope.sequence))).toEqual(snapshot.map((_, i) => i));
  });

  it("carries each rank's ActiveLoad as GET /load shows it", async () => {
    const client = engineClient(sidecar.address);
    cleanups.push(() => client.close());
    const metadata = new grpc.Metadata();
    metadata.set(DP_RANK_HEADER, '1');
    const generate = (client as unknown as Record<string, (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<unknown>>)['Generate']!;
    // 40 prompt tokens, decoding for up to 18 s (far longer than this test, which cancels it).
    const call = generate.call(
      client,
      {
        request_id: 'dynamo-format',
        tokenized: { original_text: '', input_ids: tokens(40) },
        sampling_params: { max_tokens: 900, ignore_eos: true },
        stream: true,
      },
      metadata,
    );
    call.on('error', () => {});
    cleanups.push(() => call.cancel());
    await new Promise((resolve) => call.once('data', resolve));

    const rank1 = async (): Promise<Record<string, unknown>> => {
      const res = await sidecar.get('/load');
      const event = (JSON.parse(res.body) as { ranks: LoadEvent[] }).ranks[1]!;
      return {
        worker_id: event.worker_id,
        dp_rank: 1,
        active_decode_blocks: event.active_decode_blocks,
        active_prefill_tokens: event.active_prefill_tokens,
        kv_used_blocks: null,
      };
    };
    const latest = (): Record<string, unknown> | undefined => {
      const load = got.filter((r) => r.load['dp_rank'] === 1).at(-1)?.load;
      return load && { ...load, worker_id: Number(load['worker_id']) };
    };
    let pair: [unknown, unknown] = [undefined, null];
    await waitFor(
      async () => {
        pair = [latest(), await rank1()];
        return JSON.stringify(pair[0]) === JSON.stringify(pair[1]) && (pair[1] as { active_decode_blocks: number }).active_decode_blocks > 0;
      },
      "rank 1's envelope to show the held call as GET /load does",
      5000,
      50,
    ).catch(() => undefined); // the expectation below shows the difference
    expect(pair[0]).toEqual(pair[1]);
    expect(pair[1]).toMatchObject({ active_decode_blocks: Math.ceil(40 / 16), active_prefill_tokens: 0 });
    call.cancel();
  });

  it('warns once at startup that our frontend needs --event-format json', () => {
    const warnings = sidecar
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: string; msg: string })
      .filter((line) => line.msg.includes('--event-format'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 'warn' });
    expect(warnings[0]!.msg).toContain('--event-format json');
  });

  it("is ignored by this project's frontend: counted as malformed, never applied, logged once, no crash", async () => {
    const published = got.length;
    await waitFor(() => frontendSource.stats.invalid >= published, 'the frontend source to have seen every envelope so far', 5000);
    expect(frontendSource.stats).toMatchObject({ events: 0, refused: 0 });
    expect(frontendSource.connected).toBe(true);
    expect(frontendPool.size).toBe(0);
    expect(frontendLogger.find('ignoring a malformed load event', 'warn')).toHaveLength(1);
  });
});
