import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { type LoadEvent } from '../../../../src/protocol/load-event.js';
import { LoadPublisher, defaultWorkerId, type LoadPublisherOptions } from '../../../../src/sidecar/load/publisher.js';
import { loadSubject } from '../../../../src/protocol/load-event.js';
import { silentLogger } from '../../../../src/platform/log.js';
import { startNatsServer, type NatsServerHandle } from '../../../support/nats-server.js';
import { waitFor } from '../../../support/wait.js';

let nats: NatsServerHandle;
let sub: NatsConnection;
const publishers: LoadPublisher[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  sub = await connect({ servers: nats.url });
});

afterAll(async () => {
  await Promise.all(publishers.map((p) => p.close()));
  await sub?.close();
  await nats?.stop();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Collects every event on `subject`; resolves once the subscription is registered with the server. */
async function listen(subject: string): Promise<LoadEvent[]> {
  const got: LoadEvent[] = [];
  sub.subscribe(subject, { callback: (_err, msg) => void got.push(msg.json<LoadEvent>()) });
  await sub.flush();
  return got;
}

async function started(tracker: LoadTracker, subject: string, options: Partial<LoadPublisherOptions> = {}): Promise<LoadPublisher> {
  const p = new LoadPublisher({ servers: nats.url, subject, source: tracker, logger: silentLogger, ...options });
  publishers.push(p);
  p.start();
  await waitFor(() => p.connected, 'the publisher to connect', 5000);
  return p;
}

describe('LoadPublisher with a real nats-server', () => {
  it('publishes one event per rank on the escaped subject with every field', async () => {
    const subject = loadSubject('dyn.amo', 'back end', 'gen*');
    expect(subject).toBe('namespace.dyn%2Eamo.component.back%20end.endpoint.gen%2A.kv_metrics');
    const got = await listen(subject);
    const workerId = defaultWorkerId('host-a', 9000);
    const tracker = new LoadTracker({
      workerId,
      dataParallelSize: 2,
      kvTotalBlocks: 64,
      maxNumBatchedTokens: 2048,
      model: 'm',
      grpcAddress: '10.1.2.3:50050',
      heartbeatMs: 60_000,
    });
    tracker.callStarted(1, 40);
    await started(tracker, subject, { heartbeatMs: 60_000 });
    await waitFor(() => got.length >= 2, 'one event per rank', 5000);
    expect(got.map((e) => e.dp_rank).sort()).toEqual([0, 1]);
    const e1 = got.find((e) => e.dp_rank === 1)!;
    expect(Object.keys(e1).sort()).toEqual(
      [
        ...[
          'active_decode_blocks',
          'active_prefill_tokens',
          'draining',
          'dp_rank',
          'engine_request',
          'engine_request_limit',
          'kv_total_blocks',
          'kv_used_blocks',
        ],
        ...[
          'max_num_batched_tokens',
          'overloaded',
          'overloaded_priority',
          'overloaded_tenants',
          'request_queue',
          'sequence',
          'timestamp_ms',
          'worker_id',
          'model',
          'grpc_address',
          'heartbeat_ms',
          'predicted_ttft_ms',
          'admit_now',
          'request_queue_limit',
        ],
      ].sort(),
    );
    expect(e1).toMatchObject({
      worker_id: workerId,
      active_prefill_tokens: 40,
      active_decode_blocks: 3,
      kv_total_blocks: 64,
      kv_used_blocks: null,
      max_num_batched_tokens: 2048,
    });
    expect(e1).toMatchObject({ model: 'm', grpc_address: '10.1.2.3:50050', heartbeat_ms: 60_000 });
  });

  it('coalesces a burst of changes into one debounced publish', async () => {
    const subject = loadSubject('ns', 'debounce', 'generate');
    const got = await listen(subject);
    const tracker = new LoadTracker({ workerId: 1 });
    await started(tracker, subject, { heartbeatMs: 60_000, debounceMs: 20 });
    await waitFor(() => got.length === 1, 'the snapshot on connect', 5000);
    const calls = Array.from({ length: 50 }, () => tracker.callStarted(0, 16));
    for (const c of calls) c.output(1);
    await waitFor(() => got.length >= 2, 'the debounced publish', 5000);
    await sleep(100); // deliberate: five more debounce windows, in which no further publish may come
    expect(got).toHaveLength(2);
    expect(got[1]).toMatchObject({ active_decode_blocks: 50, active_prefill_tokens: 0, sequence: 2 });
  });

  it('keeps an idle worker publishing on the heartbeat, with rising sequence numbers', async () => {
    const subject = loadSubject('ns', 'heartbeat', 'generate');
    const got = await listen(subject);
    await started(new LoadTracker({ workerId: 1 }), subject, { heartbeatMs: 80 });
    await waitFor(() => got.length >= 4, 'four heartbeats', 3000);
    const seqs = got.map((e) => e.sequence);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
  });

  it('delivers publishNow at once, ahead of both debounce and heartbeat', async () => {
    const subject = loadSubject('ns', 'now', 'generate');
    const got = await listen(subject);
    const tracker = new LoadTracker({ workerId: 1 });
    const p = await started(tracker, subject, { heartbeatMs: 60_000, debounceMs: 10_000 });
    await waitFor(() => got.length === 1, 'the snapshot on connect', 5000);
    tracker.setAdmission({ engineRequest: 2, requestQueue: 2, limit: 2, queueLimit: 2 });
    tracker.markRejected();
    const t0 = Date.now();
    p.publishNow();
    await waitFor(() => got.length === 2, 'the event published at once', 1000);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(got[1]).toMatchObject({ overloaded: true, engine_request: 2, request_queue: 2, engine_request_limit: 2 });
  });
});
