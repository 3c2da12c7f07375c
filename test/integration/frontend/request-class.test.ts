/**
 * Request classes end to end, with real processes and the official `openai` client:
 *
 * - priority-aware shedding: a simulated engine (slow decode, small KV) behind a sidecar holds
 *   one long call, so a few KV blocks are in use; the frontend's decode threshold is 0.5 of the
 *   KV, and priority class 5 has scale 0.02 (busy above 0.64 blocks) while class 1 has scale 1.
 *   The low class gets 529, the high class is served, each counted under its class.
 * - forwarding: a fake engine behind a real sidecar records each Generate call's metadata:
 *   `x-request-priority` (always) and `x-tenant-id` (when there is a tenant) reach it.
 * - the tenant cap: a tenant at --tenant-max-inflight 1 gets 429 with Retry-After through the
 *   client; once its request ends (here: the client gives up), the tenant is served again.
 * Needs dist/ (npm run build).
 */
import * as grpc from '@grpc/grpc-js';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSidecarProcess, type SidecarProcess } from '../../support/sidecar-process.js';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { engineClient, startGenerate, tokens, VllmEngineClient } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
afterAll(() => sys.stopAll());

function openai(frontend: FrontendProcess): OpenAI {
  return new OpenAI({ baseURL: `${frontend.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 20_000 });
}

/** The error a call rejected with (fails the test if it succeeded). */
async function refusal(call: Promise<unknown>): Promise<APIError> {
  const outcome = await call.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(outcome).toBeInstanceOf(APIError);
  return outcome as APIError;
}

describe('priority-aware shedding', () => {
  let worker: Worker;
  let frontend: FrontendProcess;
  let hold: grpc.ClientReadableStream<unknown>;
  let holdClient: grpc.Client;

  beforeAll(async () => {
    worker = await sys.worker({ engine: ['--num-gpu-blocks', '64', '--block-size', '4', '--decode-step-ms', '500'] });
    frontend = await sys.frontend(['--worker', worker.sidecar.address, '--active-decode-blocks-threshold', '0.5', '--priority-threshold-scale', '1=1,5=0.02']);
    await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know the worker');
    // One long call straight to the sidecar (8 + 200 tokens fit the 256-token KV): a few of the
    // 64 blocks in use, growing by one every 2 s, so 32 (the high class's threshold) only after a minute.
    holdClient = engineClient(worker.sidecar.address);
    hold = startGenerate(holdClient, {
      request_id: 'hold',
      tokenized: { original_text: '', input_ids: tokens(8) },
      sampling_params: { max_tokens: 200, ignore_eos: true },
      stream: true,
    });
    hold.on('error', () => {});
    await waitFor(async () => (await frontend.metric('dynamo_frontend_worker_active_decode_blocks')) >= 1, 'the frontend to see blocks in use', 15_000, 50);
  });
  afterAll(() => {
    hold?.cancel();
    holdClient?.close();
  });

  it('answers the low class 529 while the high class is served, through the openai client, and counts each under its class', async () => {
    const client = openai(frontend);
    const body = { model: worker.engine.model, messages: [{ role: 'user' as const, content: 'hello there' }], max_tokens: 1 };
    const low = await refusal(client.chat.completions.create(body, { headers: { 'x-request-priority': '5' } }));
    expect(low.status).toBe(529);
    expect(low.headers?.get('retry-after')).toBe('1');
    // The body's priority field selects the class as well (vLLM's extension field; the SDK sends it through).
    const lowByBody = await refusal(client.chat.completions.create({ ...body, priority: 7 } as typeof body));
    expect(lowByBody.status).toBe(529);

    const high = await client.chat.completions.create(body, { headers: { 'x-request-priority': '1' } });
    expect(high.choices[0]!.finish_reason).toBe('length');
    const highStream = await client.chat.completions.create({ ...body, stream: true }, { headers: { 'x-request-priority': '2' } });
    let chunks = 0;
    for await (const chunk of highStream) if (chunk.choices[0]?.delta.content) chunks++;
    expect(chunks).toBe(1);

    const counted = (priority_class: string, outcome: string) => frontend.metric('dynamo_frontend_priority_class_requests_total', { priority_class, outcome });
    expect(await counted('5', 'overloaded')).toBe(2);
    expect(await counted('1', 'served')).toBe(2);
    const listed = JSON.parse((await frontend.get('/busy_threshold')).body) as { thresholds: { priority_threshold_scales?: Record<string, number> }[] };
    expect(listed.thresholds[0]!.priority_threshold_scales).toEqual({ '1': 1, '5': 0.02 });
  });
});

describe('priority and tenant on the wire, and the tenant cap', () => {
  const seen: { requestId: string; priority: string[]; tenant: string[] }[] = [];
  let engine: grpc.Server;
  let sidecar: SidecarProcess;
  let frontend: FrontendProcess;

  beforeAll(async () => {
    // A fake engine that records each call's metadata; a call with priority 99 is held until cancelled.
    engine = new grpc.Server();
    engine.addService(VllmEngineClient.service, {
      Generate: (call: grpc.ServerWritableStream<{ request_id: string }, unknown>) => {
        const priority = call.metadata.get('x-request-priority').map(String);
        seen.push({ requestId: call.request.request_id, priority, tenant: call.metadata.get('x-tenant-id').map(String) });
        if (priority[0] === '99') return void call.on('cancelled', () => call.end());
        call.write({ chunk: { token_ids: [1], prompt_tokens: 1, completion_tokens: 1 } });
        call.write({ complete: { output_ids: [1], finish_reason: 'length', prompt_tokens: 1, completion_tokens: 1 } });
        call.end();
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      engine.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    sidecar = await startSidecarProcess(['--upstream', `127.0.0.1:${port}`, '--served-model-name', 'fake', '--load-heartbeat-ms', '200']);
    frontend = await sys.frontend(['--worker', sidecar.address, '--tenant-max-inflight', '1', '--default-priority', '4']);
    await waitFor(
      async () => (await frontend.get('/ready')).status === 200 && (await frontend.get('/v1/models')).body.includes('fake'),
      'the frontend to know the worker',
    );
  });
  afterAll(async () => {
    await frontend?.stop();
    await sidecar?.stop();
    engine?.forceShutdown();
  });

  it('sends x-request-priority on every call (the resolved one: header, body, default) and x-tenant-id when there is a tenant', async () => {
    const client = openai(frontend);
    const body = { model: 'fake', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 1 };
    await client.chat.completions.create(body, { headers: { 'x-request-priority': '-3', 'x-tenant-id': 'team-a' } });
    await client.chat.completions.create({ ...body, user: 'alice', priority: 6 } as typeof body);
    await client.completions.create({ model: 'fake', prompt: 'hi', max_tokens: 1 });
    expect(seen.map(({ priority, tenant }) => ({ priority, tenant }))).toEqual([
      { priority: ['-3'], tenant: ['team-a'] },
      { priority: ['6'], tenant: ['alice'] },
      { priority: ['4'], tenant: [] },
    ]);
  });

  it('answers a tenant at its cap 429 with Retry-After through the openai client, and serves it again once its request ended', async () => {
    const client = openai(frontend);
    const body = { model: 'fake', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 1 };
    const giveUp = new AbortController();
    const held = client.chat.completions.create(body, { headers: { 'x-request-priority': '99', 'x-tenant-id': 'team-c' }, signal: giveUp.signal });
    held.catch(() => {});
    await waitFor(() => seen.some((s) => s.priority[0] === '99'), 'the held call at the engine');
    expect(await frontend.metric('dynamo_frontend_tenant_inflight_requests', { tenant: 'team-c' })).toBe(1);

    const capped = await refusal(client.chat.completions.create(body, { headers: { 'x-tenant-id': 'team-c' } }));
    expect(capped.status).toBe(429);
    expect(Number(capped.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(capped.error).toMatchObject({ type: 'rate_limit_exceeded', code: 429 });
    // Another tenant, and anonymous requests, are not held back by team-c's cap.
    await client.chat.completions.create(body, { headers: { 'x-tenant-id': 'team-d' } });
    await client.chat.completions.create(body);

    giveUp.abort();
    await waitFor(async () => (await frontend.metric('dynamo_frontend_tenant_inflight_requests', { tenant: 'team-c' })) === 0, 'team-c’s slot given back');
    const served = await client.chat.completions.create(body, { headers: { 'x-tenant-id': 'team-c' } });
    expect(served.choices).toHaveLength(1);
    expect(await frontend.metric('dynamo_frontend_tenant_requests_total', { tenant: 'team-c', outcome: 'tenant_capped' })).toBe(1);
    expect(await frontend.metric('dynamo_frontend_tenant_requests_total', { tenant: 'team-c', outcome: 'served' })).toBe(1);
  });
});
