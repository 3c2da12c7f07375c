/**
 * Credits end to end (worker-credit.ts): a real sidecar (N=2, Q=2: 4 calls) in front of a simulated engine
 * publishes admit_now on its load stream, and the real frontend sends it no more calls than that
 * until its next event. The frontend answers 529 itself, with `no_credit` in the details, and the
 * worker refuses nothing: its rejection counter stays at 0.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { engineClient, holdCalls } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let worker: Worker;
let frontend: FrontendProcess;
let model: string;
let client: grpc.Client;

beforeAll(async () => {
  worker = await sys.worker({ sidecarEnv: { DYN_ENGINE_REQUEST_LIMIT: '2', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' } });
  model = worker.engine.model;
  client = engineClient(worker.sidecar.address);
  frontend = await sys.frontend(['--worker', worker.sidecar.address, '--overload-lease-ms', '20000']);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know the worker');
});
afterAll(async () => {
  client?.close();
  await sys.stopAll();
});

const chat = () => frontend.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 });
const refusals = () => worker.sidecar.metric('dynamo_rejection_request_total');

/** A streaming completion through the frontend that runs for minutes, until abort(). */
function holdThroughFrontend(): AbortController {
  const abort = new AbortController();
  fetch(`${frontend.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hold' }], max_tokens: 4000, stream: true }),
    signal: abort.signal,
  }).catch(() => {}); // ended by abort()
  return abort;
}

describe('credits: the frontend sends no more than the worker said it admits', () => {
  it('a worker filled by others gives no credit: 529 from the frontend, nothing refused by the worker, until its next event', async () => {
    const held = holdCalls(client, 4);
    await waitFor(async () => (await frontend.metric('dynamo_frontend_worker_credits')) === 0, 'the frontend to see no credit', 5000, 20);
    const before = await refusals();
    const res = await chat();
    expect(res.status).toBe(529);
    expect(JSON.parse(res.body)).toMatchObject({ details: { workers: 1, no_credit: 1, worker_overloaded: 0 } });
    expect(await refusals()).toBe(before);
    held.cancel();
    // The event that follows the freed slots gives the credit back (no lease to wait out).
    await waitFor(async () => (await chat()).status === 200, 'a request to succeed once the worker has room', 5000, 20);
    expect(await refusals()).toBe(before);
  });

  it('its own calls spend the credit at once, before any event: the fifth request is answered 529 without a worker refusal', async () => {
    await waitFor(async () => (await frontend.metric('dynamo_frontend_worker_credits')) === 4, 'the whole credit back', 5000, 20);
    const before = await refusals();
    const held = Array.from({ length: 4 }, holdThroughFrontend);
    await waitFor(
      async () => (await worker.sidecar.metric('dynamo_engine_request')) === 2 && (await worker.sidecar.metric('dynamo_request_queue')) === 2,
      'the four to fill the worker',
    );
    const res = await chat();
    expect(res.status).toBe(529);
    expect(JSON.parse(res.body)).toMatchObject({ details: { no_credit: 1 } });
    expect(await refusals()).toBe(before);
    for (const h of held) h.abort();
    await waitFor(async () => (await worker.sidecar.metric('dynamo_engine_request')) === 0, 'the held calls to end');
    await waitFor(async () => (await chat()).status === 200, 'a request to succeed after', 5000, 20);
  });
});
