/**
 * A --worker sidecar that comes back under a new worker_id at the same address (its default id
 * hashes the hostname, which changes when a container is recreated): every Watch update is a
 * snapshot of all its ranks, so the old id is gone. Kept, it would stay "connected" with stale
 * load (free) for ever: routable, never busy, and never forgotten (push workers are not swept).
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/platform/log.js';
import { WorkerPool } from '../../../src/frontend/routing/worker-pool.js';
import { PushLoadSource, workerLoadClientCtor } from '../../../src/frontend/sources/push-source.js';
import { waitFor } from '../../support/wait.js';

let server: grpc.Server | undefined;
let source: PushLoadSource | undefined;
afterEach(() => {
  source?.close();
  server?.forceShutdown();
});

type Watch = grpc.ServerWritableStream<object, { ranks: object[] }>;

describe('a push worker whose sidecar changed its worker_id', () => {
  it('is replaced by the new id, not kept beside it', async () => {
    const streams: Watch[] = [];
    server = new grpc.Server();
    server.addService(workerLoadClientCtor().service, { Watch: (call: Watch) => void streams.push(call) });
    const port = await new Promise<number>((resolve, reject) =>
      server!.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const pool = new WorkerPool({ defaultHeartbeatMs: 1000, leaseMs: 1000, maxWorkers: 100 });
    source = new PushLoadSource({ addresses: [`127.0.0.1:${port}`], pool, now: Date.now, logger: silentLogger, defaultHeartbeatMs: 60_000 });
    source.start();
    await waitFor(() => streams.length === 1, 'the Watch stream');
    const rank = (workerId: number) => ({ worker_id: workerId, dp_rank: 0, model: 'm', heartbeat_ms: 60_000 });

    streams[0]!.write({ ranks: [rank(11)] });
    await waitFor(() => pool.get('11') !== undefined, 'the first id');
    streams[0]!.write({ ranks: [rank(22)] });
    await waitFor(() => pool.get('22') !== undefined, 'the new id');
    expect(pool.get('11')).toBeUndefined();
    expect(pool.size).toBe(1);
  });
});
