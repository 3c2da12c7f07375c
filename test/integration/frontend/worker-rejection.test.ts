/**
 * Worker-side rejection end to end: sidecars with a hard cap of 3 calls (N=1, Q=2) in front of
 * simulated engines, filled directly over gRPC with long calls, and a frontend with no
 * thresholds. A sidecar's RESOURCE_EXHAUSTED sends the request to another worker; when every
 * worker refuses, the client gets 529 with Retry-After; once the load is gone, nothing is
 * refused even within the (here 20 s) lease: the worker's next load event clears it.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { engineClient, holdCalls } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let workers: Worker[];
let frontend: FrontendProcess;
let model: string;
const clients: grpc.Client[] = [];

beforeAll(async () => {
  const sidecarEnv = { DYN_ENGINE_REQUEST_LIMIT: '1', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' };
  workers = [await sys.worker({ sidecarEnv }), await sys.worker({ sidecarEnv })];
  model = workers[0]!.engine.model;
  frontend = await sys.frontend([...workers.flatMap((w) => ['--worker', w.sidecar.address]), '--overload-lease-ms', '20000']);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know both workers');
});
afterAll(async () => {
  for (const c of clients) c.close();
  await sys.stopAll();
});

/** Fills a sidecar (1 in the engine + 2 queued) with calls that run for minutes; returns a cancel. */
async function saturate(worker: Worker): Promise<() => void> {
  const client = engineClient(worker.sidecar.address);
  clients.push(client);
  const held = holdCalls(client, 3);
  await waitFor(async () => (await worker.sidecar.metric('dynamo_request_queue')) === 2, 'the sidecar queue to fill');
  return () => held.cancel();
}

const chat = (stream = false) => frontend.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4, stream });

describe('worker-side rejection (RESOURCE_EXHAUSTED) at the frontend', () => {
  it('one worker saturated: requests land on the other, none is refused', async () => {
    const release = await saturate(workers[0]!);
    const served = async (): Promise<number> => (await workers[1]!.sidecar.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')) || 0;
    const before = await served();
    for (let i = 0; i < 6; i++) expect((await chat(i % 2 === 1)).status).toBe(200);
    // The sidecar counts a call when its trailers pass, a moment after the frontend answered.
    await waitFor(async () => (await served()) - before === 6, 'worker 1 to have served all six', 5000, 20);
    release();
    await waitFor(async () => (await workers[0]!.sidecar.metric('dynamo_engine_request')) === 0, 'worker 0 to empty');
  });

  it('both saturated: 529 with our body, Retry-After and details, streaming too; counted as worker rejections', async () => {
    const releases = [await saturate(workers[0]!), await saturate(workers[1]!)];
    for (const stream of [false, true]) {
      const res = await chat(stream);
      expect(res.status).toBe(529);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      const body = JSON.parse(res.body) as Record<string, unknown>;
      expect(body).toMatchObject({ message: 'Service temporarily overloaded', type: 'Overloaded', code: 529 });
      expect(body['details']).toMatchObject({ workers: 2 });
    }
    expect(await frontend.metric('dynamo_frontend_model_rejection_total', { model, endpoint: 'chat_completions' })).toBeGreaterThanOrEqual(2);

    // Load drops: the next load event clears the 20 s lease at once (no stale busy).
    releases.forEach((release) => release());
    await waitFor(
      async () => (await workers[0]!.sidecar.metric('dynamo_engine_request')) + (await workers[1]!.sidecar.metric('dynamo_engine_request')) === 0,
      'both workers to empty',
    );
    await waitFor(async () => (await chat()).status === 200, 'a request to succeed after the load dropped', 2000, 50);
    for (let i = 0; i < 6; i++) expect((await chat()).status).toBe(200);
  });
});
