/**
 * A call displaced from a sidecar's full queue goes elsewhere: two workers (N = 1, Q = 2), each
 * with one long call in the engine and one batch call queued, filled directly over gRPC. The
 * frontend's batch request (x-request-priority 5, through the official openai client) queues on
 * one of them; an urgent call sent to that sidecar takes its place, the sidecar answers it
 * RESOURCE_EXHAUSTED (reason displaced), and the frontend retries it on the other worker, where
 * it completes once the engines are free. The client sees one ordinary completion.
 */
import * as grpc from '@grpc/grpc-js';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { engineClient, startGenerate, tokens } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let workers: Worker[];
let frontend: FrontendProcess;
let model: string;
const clients: grpc.Client[] = [];
const calls: grpc.ClientReadableStream<unknown>[] = [];

beforeAll(async () => {
  const sidecarEnv = { DYN_ENGINE_REQUEST_LIMIT: '1', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' };
  workers = [await sys.worker({ sidecarEnv }), await sys.worker({ sidecarEnv })];
  model = workers[0]!.engine.model;
  frontend = await sys.frontend(workers.flatMap((w) => ['--worker', w.sidecar.address]));
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know both workers');
});

afterAll(async () => {
  for (const call of calls) call.cancel();
  for (const client of clients) client.close();
  await sys.stopAll();
});

/** A call that runs for minutes, sent straight to a sidecar with the given priority. */
function longCall(worker: Worker, priority: number): void {
  const client = engineClient(worker.sidecar.address);
  clients.push(client);
  const metadata = new grpc.Metadata();
  metadata.set('x-request-priority', String(priority));
  const call = startGenerate(
    client,
    {
      request_id: `direct-${calls.length}`,
      tokenized: { original_text: '', input_ids: tokens(8) },
      sampling_params: { max_tokens: 4000, ignore_eos: true },
      stream: true,
    },
    {},
    metadata,
  );
  call.on('error', () => {});
  call.on('data', () => {});
  calls.push(call);
}

const queued = (worker: Worker): Promise<number> => worker.sidecar.metric('dynamo_request_queue');

describe('a batch request displaced from a full queue', () => {
  it('is answered RESOURCE_EXHAUSTED by that sidecar and retried by the frontend on another worker', async () => {
    for (const worker of workers) {
      longCall(worker, 0); // in the engine
      await waitFor(async () => (await worker.sidecar.metric('dynamo_engine_request')) === 1, 'a call in the engine');
      longCall(worker, 5); // queued, batch
      await waitFor(async () => (await queued(worker)) === 1, 'a batch call queued');
    }

    const openai = new OpenAI({ baseURL: `${frontend.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
    const request = openai.chat.completions.create(
      { model, messages: [{ role: 'user', content: 'a batch job' }], max_tokens: 4 },
      { headers: { 'x-request-priority': '5' } },
    );
    let first: Worker | undefined;
    await waitFor(async () => {
      for (const worker of workers) if ((await queued(worker)) === 2) first = worker;
      return first !== undefined;
    }, 'the frontend request queued on one worker');
    const other = workers.find((w) => w !== first)!;
    const retriesBefore = await frontend.metric('dynamo_frontend_retries_total', { model });

    // An urgent call takes the newest batch call's place: the frontend's.
    longCall(first!, -1);
    await waitFor(async () => (await first!.sidecar.metric('dynamo_sidecar_rejections_total', 'reason="displaced"')) === 1, 'the displacement');
    await waitFor(async () => (await queued(other)) === 2, 'the retry queued on the other worker');
    expect(await frontend.metric('dynamo_frontend_retries_total', { model })).toBe(retriesBefore + 1);

    // The engines free up: the retried request completes on the other worker.
    for (const call of calls.splice(0)) call.cancel();
    const completion = await request;
    expect(completion.choices[0]!.message.content).toBeTruthy();
    expect(completion.usage?.completion_tokens).toBe(4);
    await waitFor(
      async () => (await other.sidecar.metric('dynamo_sidecar_class_requests_total', 'priority="5",tenant="",outcome="admitted"')) >= 1,
      'the retry admitted',
    );
  });
});
