// The OpenAI routes over a fake router and scripted workers: answer shapes, streaming, request parsing and 4xx errors.
import { afterEach, describe, expect, it } from 'vitest';
import { OUTPUT_WORDS } from '../../../../src/frontend/text/default-tokenizer.js';
import { createDefaultTokenizer } from '../../../../src/frontend/text/default-tokenizer.js';
import { PromptAdmission } from '../../../../src/frontend/generate/prompt-admission.js';
import { PromptEncoder } from '../../../../src/frontend/text/prompt-encoder.js';
import type { PromptTokenizer } from '../../../../src/frontend/text/prompt-tokenizer.js';
import { waitFor } from '../../../support/wait.js';
import { metricValue, sentTokenized, sseEvents, streams, testApp, type TestApp } from '../../../support/frontend-fakes.js';

let t: TestApp;
afterEach(async () => {
  await t?.app.close();
});

const chat = (body: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'm1', messages: [{ role: 'user', content: 'hi there' }], ...body } });
const completion = (body: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url: '/v1/completions', payload: { model: 'm1', prompt: 'once upon a time', ...body } });
const words = (...ids: number[]) => ids.map((id) => `${OUTPUT_WORDS[id % OUTPUT_WORDS.length]} `).join('');

describe('GET /v1/models', () => {
  it("lists the router's models in OpenAI's list shape", async () => {
    t = testApp();
    t.router.modelList = ['b-model', 'a-model'];
    const res = await t.app.inject({ method: 'GET', url: '/v1/models' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      object: 'list',
      data: [
        { id: 'a-model', object: 'model', created: 1_700_000_000, owned_by: 'dynamo-sidecar' },
        { id: 'b-model', object: 'model', created: 1_700_000_000, owned_by: 'dynamo-sidecar' },
      ],
    });
  });
});

describe('non-streaming answers', () => {
  it('answer a chat completion with the whole text, finish_reason and usage', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1, 2, 3], 'length');
    const res = await chat({});
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      id: 'chatcmpl-req1',
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'm1',
      choices: [{ index: 0, message: { role: 'assistant', content: words(1, 2, 3) }, logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 },
    });
  });

  it('answer a text completion in the text_completion shape, with the worker finish reason "stop"', async () => {
    t = testApp();
    t.workers.defaultScript = streams([5, 6], 'stop');
    const res = await completion({});
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      id: 'cmpl-req1',
      object: 'text_completion',
      created: 1_700_000_000,
      model: 'm1',
      choices: [{ index: 0, text: words(5, 6), logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
    });
  });

  it('send the worker a tokenized, always-streaming Generate with the sampling parameters, and the ids without a second copy of the text', async () => {
    t = testApp();
    await chat({ max_tokens: 7, temperature: 0.5, seed: 42, user: 'someone', logit_bias: {}, tools: [] });
    const prompt = 'user: hi there\nassistant:';
    const { tokenized_bytes: _bytes, ...rest } = t.workers.calls[0]!.request;
    expect(rest).toEqual({ request_id: 'req1', sampling_params: { n: 1, max_tokens: 7, temperature: 0.5, seed: 42 }, stream: true });
    expect(sentTokenized(t.workers.calls[0]!.request)).toEqual({ original_text: '', input_ids: createDefaultTokenizer().encode(prompt) });
    expect(t.router.routeCalls[0]).toEqual({ model: 'm1', tried: [], promptTokens: 4 });
  });

  it('prefer max_completion_tokens over max_tokens for chat', async () => {
    t = testApp();
    await chat({ max_tokens: 7, max_completion_tokens: 3 });
    expect(t.workers.calls[0]!.request.sampling_params?.max_tokens).toBe(3);
  });

  it('accept a completion prompt given as token ids or as a one-string array', async () => {
    t = testApp();
    expect((await completion({ prompt: [11, 12, 13] })).statusCode).toBe(200);
    expect(sentTokenized(t.workers.calls[0]!.request)).toEqual({ original_text: '', input_ids: [11, 12, 13] });
    expect((await completion({ prompt: ['a b'] })).statusCode).toBe(200);
    expect(sentTokenized(t.workers.calls[1]!.request)?.input_ids).toHaveLength(2);
  });

  it('accept chat content as an array of text parts', async () => {
    t = testApp();
    const res = await chat({
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi ' },
            { type: 'text', text: 'there' },
          ],
        },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(sentTokenized(t.workers.calls[0]!.request)?.input_ids).toEqual(createDefaultTokenizer().encode('user: hi there\nassistant:'));
  });
});

describe('stop strings', () => {
  it('cut the text before the first stop string, finish with "stop", and cancel the worker call', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1, 2, 3, 4, 5, 6], 'length', 5);
    const res = await completion({ stop: ['zzz', `${OUTPUT_WORDS[3]} ${OUTPUT_WORDS[4]}`] });
    const body = res.json<{ choices: unknown[]; usage: { completion_tokens: number } }>();
    expect(body.choices[0]).toMatchObject({ text: words(1, 2), finish_reason: 'stop' });
    expect(body.usage.completion_tokens).toBe(4);
    expect(t.workers.calls[0]!.cancelled).toBe(true);
    expect(t.router.inflight[0]!.ends).toBe(1);
  });

  it('accept a single string and never stream any part of the stop string', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1, 2, 3], 'length');
    const res = await chat({ stop: `${OUTPUT_WORDS[2]}`, stream: true });
    const events = sseEvents(res.body) as { choices: { delta: { content?: string }; finish_reason: string | null }[] }[];
    const text = events
      .slice(0, -1)
      .map((e) => e.choices[0]?.delta.content ?? '')
      .join('');
    expect(text).toBe(words(1));
    expect(events.at(-2)!.choices[0]!.finish_reason).toBe('stop');
  });
});

describe('streaming answers', () => {
  it('stream chat as chat.completion.chunk events: role first, one content chunk per token, a finish chunk, then [DONE]', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1, 2, 3], 'stop');
    const res = await chat({ stream: true });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    const events = sseEvents(res.body);
    const head = { id: 'chatcmpl-req1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'm1' };
    const choice = (delta: object, finish: string | null = null) => ({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    expect(events).toEqual([
      choice({ role: 'assistant', content: '' }),
      choice({ content: words(1) }),
      choice({ content: words(2) }),
      choice({ content: words(3) }),
      choice({}, 'stop'),
      '[DONE]',
    ]);
    expect(res.body.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('stream completions as text_completion chunks', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1, 2], 'length');
    const events = sseEvents((await completion({ stream: true })).body);
    const head = { id: 'cmpl-req1', object: 'text_completion', created: 1_700_000_000, model: 'm1' };
    expect(events).toEqual([
      { ...head, choices: [{ index: 0, text: words(1), logprobs: null, finish_reason: null }] },
      { ...head, choices: [{ index: 0, text: words(2), logprobs: null, finish_reason: null }] },
      { ...head, choices: [{ index: 0, text: '', logprobs: null, finish_reason: 'length' }] },
      '[DONE]',
    ]);
  });

  it('with stream_options.include_usage, give every chunk usage null and add a last chunk with no choices and the usage', async () => {
    t = testApp();
    t.workers.defaultScript = streams([1, 2], 'length');
    const events = sseEvents((await chat({ stream: true, stream_options: { include_usage: true } })).body) as Record<string, unknown>[];
    expect(events.slice(0, -2).every((e) => e['usage'] === null)).toBe(true);
    expect(events.at(-2)).toEqual({
      id: 'chatcmpl-req1',
      object: 'chat.completion.chunk',
      created: 1_700_000_000,
      model: 'm1',
      choices: [],
      usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
    });
    expect(events.at(-1)).toBe('[DONE]');
  });

  it('without include_usage, send no usage field and no usage chunk', async () => {
    t = testApp();
    const events = sseEvents((await chat({ stream: true })).body) as Record<string, unknown>[];
    expect(events.some((e) => typeof e === 'object' && 'usage' in e)).toBe(false);
  });
});

describe('request errors', () => {
  const expectBadRequest = (res: { statusCode: number; json(): unknown }, message: string | RegExp) => {
    expect(res.statusCode).toBe(400);
    const body = res.json() as { message: string };
    expect(body).toEqual({ message: expect.any(String), type: 'BadRequest', code: 400, error: { message: expect.any(String), type: 'BadRequest', code: 400 } });
    expect(body.message).toMatch(message);
  };

  it('name the field of a schema violation, in the flat {message,type,code} shape', async () => {
    t = testApp();
    expectBadRequest(await chat({ messages: 'hello' }), 'body/messages must be array');
    expectBadRequest(await chat({ temperature: 'hot' }), 'body/temperature must be number,null');
    expectBadRequest(await chat({ max_tokens: 0 }), 'body/max_tokens must be >= 1');
    expectBadRequest(await chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), /body\/stop/);
    expectBadRequest(
      await t.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: 'm1' } }),
      "body must have required property 'messages'",
    );
    expectBadRequest(await completion({ prompt: [[1, 2]] }), /body\/prompt/);
    expect(t.workers.calls).toHaveLength(0);
  });

  it('refuse n other than 1, one prompt per request only, and non-text content parts', async () => {
    t = testApp();
    expectBadRequest(await chat({ n: 2 }), 'body/n must be 1 (one choice per request is supported), got 2');
    expectBadRequest(await completion({ prompt: ['a', 'b'] }), 'body/prompt: only one prompt per request is supported, got 2');
    expectBadRequest(await chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }), /only text content parts are supported/);
    expectBadRequest(await completion({ prompt: '   ' }), 'body/prompt: the prompt has no tokens');
    expect((await chat({ n: 1 })).statusCode).toBe(200);
  });

  it('answer bad JSON with 400, a non-JSON content type with 415, a body over the limit with 413, in the same shape', async () => {
    t = testApp({ options: { bodyLimitBytes: 1024 } });
    const bad = await t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, payload: '{"model": ' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ type: 'BadRequest', code: 400 });
    const text = await t.app.inject({ method: 'POST', url: '/v1/completions', headers: { 'content-type': 'text/plain' }, payload: '{}' });
    expect(text.statusCode).toBe(415);
    expect(text.json()).toEqual({
      message: expect.any(String),
      type: 'UnsupportedMediaType',
      code: 415,
      error: { message: expect.any(String), type: 'UnsupportedMediaType', code: 415 },
    });
    const big = await completion({ prompt: 'x '.repeat(1000) });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual({
      message: expect.any(String),
      type: 'PayloadTooLarge',
      code: 413,
      error: { message: expect.any(String), type: 'PayloadTooLarge', code: 413 },
    });
  });

  it("refuse with 413, before any worker is called, a prompt whose Generate message would not fit the workers' message limit", async () => {
    const limit = 64 * 1024;
    t = testApp({ options: { bodyLimitBytes: 1024 * 1024 }, prompts: new PromptAdmission(new PromptEncoder(createDefaultTokenizer()), limit) });
    // 100,000 words of one 2-byte id each: about 200 KB of ids against a 64 KiB message.
    for (const res of [await completion({ prompt: 'a '.repeat(100_000) }), await completion({ prompt: Array.from({ length: 70_000 }, () => 1) })]) {
      expect(res.statusCode).toBe(413);
      const message = `the prompt is too large for a worker: its Generate message would exceed ${limit} bytes (the workers' gRPC message limit); shorten the prompt`;
      expect(res.json()).toEqual({ message, type: 'PayloadTooLarge', code: 413, error: { message, type: 'PayloadTooLarge', code: 413 } });
    }
    expect(t.workers.calls).toHaveLength(0);
    expect(await metricValue(t.registry, 'dynamo_frontend_requests_total', { model: 'm1', endpoint: 'completions', status: '413' })).toBe(2);
    // Just under the limit is sent whole.
    expect((await completion({ prompt: 'a '.repeat(30_000) })).statusCode).toBe(200);
    expect(sentTokenized(t.workers.calls[0]!.request)?.input_ids).toHaveLength(30_000);
  });

  it('refuse a chat whose prompt has no tokens, naming messages', async () => {
    const silent: PromptTokenizer = { ...createDefaultTokenizer(), eachToken: () => {} };
    t = testApp({ prompts: new PromptAdmission(new PromptEncoder(silent), 1 << 20) });
    expectBadRequest(await chat({}), 'body/messages: the prompt has no tokens');
  });

  it('count rejected bodies under the "unknown" model label with their status', async () => {
    t = testApp();
    await chat({ messages: 'hello' });
    expect(await metricValue(t.registry, 'dynamo_frontend_requests_total', { model: 'unknown', endpoint: 'chat_completions', status: '400' })).toBe(1);
  });
});

describe('request metrics', () => {
  it('count each answered request once by model, endpoint and status, and time it', async () => {
    t = testApp();
    await chat({});
    await completion({ stream: true });
    expect(await metricValue(t.registry, 'dynamo_frontend_requests_total', { model: 'm1', endpoint: 'chat_completions', status: '200' })).toBe(1);
    expect(await metricValue(t.registry, 'dynamo_frontend_requests_total', { model: 'm1', endpoint: 'completions', status: '200' })).toBe(1);
    const text = await t.registry.metrics();
    expect(text).toContain('dynamo_frontend_request_duration_seconds_count{model="m1",endpoint="chat_completions"} 1');
    expect(text).toContain('dynamo_frontend_time_to_first_token_seconds_count{model="m1"} 2');
    expect(text).toContain('dynamo_frontend_inter_token_latency_seconds_count{model="m1"} 4');
    expect(await metricValue(t.registry, 'dynamo_frontend_inflight_requests', { model: 'm1' })).toBe(0);
  });

  it('count a request in flight while its worker is generating', async () => {
    t = testApp();
    t.workers.defaultScript = (call) =>
      void setTimeout(() => call.send({ chunk: { token_ids: [1], prompt_tokens: 0, completion_tokens: 1, cached_tokens: 0 } }), 0);
    const pending = chat({ stream: true });
    await waitFor(() => t.workers.calls.length === 1, 'the worker call');
    await waitFor(async () => (await metricValue(t.registry, 'dynamo_frontend_inflight_requests', { model: 'm1' })) === 1, 'one request in flight');
    t.workers.calls[0]!.send({
      complete: { output_ids: [1], finish_reason: 'stop', prompt_tokens: 4, completion_tokens: 1, cached_tokens: 0 },
    });
    t.workers.calls[0]!.end({ code: 0, details: '' });
    expect((await pending).statusCode).toBe(200);
    expect(await metricValue(t.registry, 'dynamo_frontend_inflight_requests', { model: 'm1' })).toBe(0);
  });
});
