/**
 * The frontend in front of real sidecar processes with a tiny admission limit
 * (DYN_ENGINE_REQUEST_LIMIT=1, DYN_DYNAMO_REQUEST_QUEUE_LIMIT=2: at most 3 calls each), over
 * simulated engines: a real RESOURCE_EXHAUSTED makes the request land on the second worker;
 * both full gives 529 with details and Retry-After; a client leaving mid-stream frees the
 * sidecar's engine slot at once. Needs dist/ (npx tsc -p tsconfig.json).
 */
import type * as grpc from '@grpc/grpc-js';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../src/tools/engine/index.js';
import { buildFrontendApp } from '../../../src/frontend/http/app.js';
import { GrpcWorkerClients } from '../../../src/frontend/generate/worker-clients.js';
import { createDefaultTokenizer } from '../../../src/frontend/text/default-tokenizer.js';
import { silentLogger } from '../../../src/platform/log.js';
import { startSidecarProcess, type SidecarProcess } from '../../support/sidecar-process.js';
import { engineClient, startGenerate, tokens } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';
import { FakeRouter, FakeThresholds, metricValue, TEST_OPTIONS, target } from '../../support/frontend-fakes.js';

const LIMIT_ENV = { DYN_ENGINE_REQUEST_LIMIT: '1', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' };
const CAP = 3;

interface Worker {
  readonly engine: RunningEngine;
  readonly sidecar: SidecarProcess;
  readonly client: grpc.Client;
}

const workers: Worker[] = [];
let clients: GrpcWorkerClients;
let router: FakeRouter;
let registry: Registry;
let app: ReturnType<typeof buildFrontendApp>;
let base: string;
/** Long Generate calls sent straight to a sidecar to fill it. */
let fillers: grpc.ClientReadableStream<unknown>[] = [];

beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    const engine = await startSimulatedEngine({ decodeStepMs: 20, modelName: 'sim' });
    const sidecar = await startSidecarProcess(['--upstream', engine.address], LIMIT_ENV);
    workers.push({ engine, sidecar, client: engineClient(sidecar.address) });
  }
  clients = new GrpcWorkerClients();
  router = new FakeRouter();
  router.modelList = ['sim'];
  router.targets = workers.map((w, i) => target(String(i + 1), w.sidecar.address));
  registry = new Registry();
  app = buildFrontendApp({
    router,
    thresholds: new FakeThresholds(),
    workers: clients,
    tokenizer: createDefaultTokenizer(),
    registry,
    logger: silentLogger,
    options: TEST_OPTIONS,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const call of fillers) call.cancel();
  fillers = [];
  for (const w of workers) {
    await waitFor(
      async () => (await w.sidecar.metric('dynamo_engine_request')) === 0 && (await w.sidecar.metric('dynamo_request_queue')) === 0,
      'sidecar empty',
    );
  }
});

afterAll(async () => {
  await app?.close();
  clients?.close();
  for (const w of workers) {
    w.client.close();
    await w.sidecar.stop();
    await w.engine.close();
  }
});

/** Fills a sidecar to its cap with long calls and waits until its gauges show it full. */
async function fill(worker: Worker): Promise<void> {
  for (let i = 0; i < CAP; i++) {
    const call = startGenerate(worker.client, {
      request_id: `filler-${i}`,
      tokenized: { original_text: '', input_ids: tokens(8) },
      sampling_params: { max_tokens: 4000 },
      stream: true,
    });
    call.on('error', () => {});
    fillers.push(call);
  }
  await waitFor(
    async () => (await worker.sidecar.metric('dynamo_engine_request')) === 1 && (await worker.sidecar.metric('dynamo_request_queue')) === CAP - 1,
    'the sidecar full',
  );
}

const chat = (body: Record<string, unknown> = {}, signal?: AbortSignal) =>
  fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim', messages: [{ role: 'user', content: 'hello' }], max_tokens: 3, ...body }),
    signal: signal ?? AbortSignal.timeout(20_000),
  });

describe('the frontend over real sidecars', () => {
  it('retries a request the first sidecar refuses with RESOURCE_EXHAUSTED on the second, which answers it', async () => {
    await fill(workers[0]!);
    router.refused.length = 0;
    const res = await chat();
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason).toBe('length');
    expect(router.refused).toEqual([{ workerId: '1', kind: 'overloaded', pushbackMs: 250 }]);
    expect(await metricValue(registry, 'dynamo_frontend_worker_rejections_total', { model: 'sim', reason: 'overloaded' })).toBe(1);
    expect(await workers[0]!.sidecar.metric('dynamo_rejection_request_total')).toBe(1);
    expect(await workers[1]!.sidecar.metric('dynamo_rejection_request_total')).toBe(0);
  });

  it('answers 529 with details and Retry-After when both sidecars refuse', async () => {
    await fill(workers[0]!);
    await fill(workers[1]!);
    router.refused.length = 0;
    const before = (await metricValue(registry, 'dynamo_frontend_model_rejection_total', { model: 'sim', endpoint: 'chat_completions' })) ?? 0;
    const res = await chat({ stream: true });
    expect(res.status).toBe(529);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toEqual({
      message: 'Service temporarily overloaded',
      type: 'Overloaded',
      code: 529,
      details: { workers: 2, busy: 1, worker_overloaded: 1, no_credit: 0, tried: 2, checks: { active_prefill_tokens_threshold: 1 } },
      error: { message: 'Service temporarily overloaded', type: 'Overloaded', code: 529 },
    });
    expect(router.refused.map((r) => r.kind)).toEqual(['overloaded', 'overloaded']);
    expect(await metricValue(registry, 'dynamo_frontend_model_rejection_total', { model: 'sim', endpoint: 'chat_completions' })).toBe(before + 1);
  });

  it('frees the sidecar engine slot at once when the client leaves mid-stream', async () => {
    const abort = new AbortController();
    const res = await chat({ stream: true, max_tokens: 4000 }, abort.signal);
    expect(res.status).toBe(200);
    const reader = (res.body! as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while ((text.match(/"content":"[^"]/gu) ?? []).length < 3) text += new TextDecoder().decode((await reader.read()).value);
    const sidecar = workers[0]!.sidecar;
    expect(await sidecar.metric('dynamo_engine_request')).toBe(1);
    abort.abort();
    const left = performance.now();
    // Two observers, each told on its own connection: the sidecar resets the engine's stream and
    // then frees the slot (proxied-call.ts terminate()), but the engine in this process may read
    // that RST_STREAM after the test has read the sidecar's gauge. Both must hold, and soon.
    await waitFor(
      async () => (await sidecar.metric('dynamo_engine_request')) === 0 && workers[0]!.engine.stats().running === 0,
      'the engine slot freed and the engine no longer running the call',
    );
    expect(performance.now() - left).toBeLessThan(2000);
  });
});
