/**
 * The frontend as the official `openai` npm client sees it, over real HTTP, with a real
 * simulated vLLM engine as the worker (the engine speaks the same Generate as a sidecar):
 * chat, streaming chat token by token, completions, and a 529 surfacing as an APIError.
 */
import type { AddressInfo } from 'node:net';
import OpenAI, { APIError } from 'openai';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../src/tools/engine/index.js';
import { buildFrontendApp } from '../../../src/frontend/http/app.js';
import { GrpcWorkerClients } from '../../../src/frontend/generate/worker-clients.js';
import { createDefaultTokenizer } from '../../../src/frontend/text/default-tokenizer.js';
import { silentLogger } from '../../../src/platform/log.js';
import { FakeRouter, FakeThresholds, OVERLOAD_DETAILS, TEST_OPTIONS, target } from '../../support/frontend-fakes.js';

const DECODE_STEP_MS = 15;

let engine: RunningEngine;
let workers: GrpcWorkerClients;
let router: FakeRouter;
let app: ReturnType<typeof buildFrontendApp>;
let client: OpenAI;
/** Raw body of the last HTTP response the client received (the SDK keeps only `error` of an error body). */
let lastBody = '';

beforeAll(async () => {
  engine = await startSimulatedEngine({ decodeStepMs: DECODE_STEP_MS, modelName: 'sim' });
  workers = new GrpcWorkerClients();
  router = new FakeRouter();
  router.modelList = ['sim'];
  router.targets = [target('1', engine.address)];
  app = buildFrontendApp({
    router,
    thresholds: new FakeThresholds(),
    workers,
    tokenizer: createDefaultTokenizer(),
    registry: new Registry(),
    logger: silentLogger,
    options: TEST_OPTIONS,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  client = new OpenAI({
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: 'x',
    maxRetries: 0,
    timeout: 20_000,
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      if (!res.ok) lastBody = await res.clone().text();
      return res;
    },
  });
});

afterAll(async () => {
  await app?.close();
  workers?.close();
  await engine?.close();
});

describe('the openai client', () => {
  it('lists the model', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['sim']);
  });

  it('gets a chat completion with the requested number of tokens and usage', async () => {
    const res = await client.chat.completions.create({ model: 'sim', messages: [{ role: 'user', content: 'tell me a story' }], max_tokens: 6 });
    expect(res.object).toBe('chat.completion');
    expect(res.choices).toHaveLength(1);
    expect(res.choices[0]!.finish_reason).toBe('length');
    expect(res.choices[0]!.message.role).toBe('assistant');
    expect(res.choices[0]!.message.content!.trim().split(' ')).toHaveLength(6);
    expect(res.usage).toEqual({ prompt_tokens: 6, completion_tokens: 6, total_tokens: 12 });
  });

  it('streams a chat completion token by token: several chunks, spread over the decode steps', async () => {
    const stream = await client.chat.completions.create({
      model: 'sim',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    const arrivals: { at: number; content: string }[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) arrivals.push({ at: performance.now(), content: choice.delta.content });
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(arrivals).toHaveLength(10);
    expect(finish).toBe('length');
    expect(usage).toEqual({ prompt_tokens: 3, completion_tokens: 10, total_tokens: 13 });
    // Ten decode steps of 15 ms: the chunks are spread out, not delivered in one burst at the end.
    expect(arrivals.at(-1)!.at - arrivals[0]!.at).toBeGreaterThan(DECODE_STEP_MS * 5);
  });

  it('gets a text completion', async () => {
    const res = await client.completions.create({ model: 'sim', prompt: 'once upon a time', max_tokens: 4 });
    expect(res.object).toBe('text_completion');
    expect(res.choices[0]!.text.trim().split(' ')).toHaveLength(4);
    expect(res.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 4 });
  });

  it("surfaces an overload as the SDK's APIError with status 529, Retry-After, our message, and our body on the wire", async () => {
    router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    try {
      const error = await client.chat.completions.create({ model: 'sim', messages: [{ role: 'user', content: 'hi' }] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(529);
      expect((error as APIError).headers?.get('retry-after')).toBe('1');
      const overload = { message: 'Service temporarily overloaded', type: 'Overloaded', code: 529 };
      expect(JSON.parse(lastBody)).toEqual({ ...overload, details: OVERLOAD_DETAILS, error: overload });
      // The SDK reads body.error: our message, type and code reach the application.
      expect((error as APIError).message).toBe('529 Service temporarily overloaded');
      expect((error as APIError).error).toEqual(overload);
      // A streaming request is refused the same way, before any SSE byte.
      const streamError = await client.chat.completions.create({ model: 'sim', messages: [{ role: 'user', content: 'hi' }], stream: true }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((streamError as APIError).status).toBe(529);
    } finally {
      router.decide = undefined;
    }
  });
});
