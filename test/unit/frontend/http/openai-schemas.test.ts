// The request body schemas, checked by Fastify's ajv with the frontend's options (no coercion, nothing removed).
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAT_COMPLETIONS_BODY, COMPLETIONS_BODY } from '../../../../src/frontend/http/openai-schemas.js';

let app: FastifyInstance;

beforeAll(async () => {
  // The ajv options of the frontend's own app, so what passes here passes there.
  app = Fastify({ ajv: { customOptions: { coerceTypes: false, removeAdditional: false } } });
  app.post('/chat', { schema: { body: CHAT_COMPLETIONS_BODY } }, (request) => request.body);
  app.post('/completions', { schema: { body: COMPLETIONS_BODY } }, (request) => request.body);
  await app.ready();
});
afterAll(async () => {
  await app.close();
});

async function post(url: string, payload: object): Promise<{ status: number; message: string; body: unknown }> {
  const response = await app.inject({ method: 'POST', url, payload });
  const body = response.json<{ message?: string }>();
  return { status: response.statusCode, message: body.message ?? '', body };
}

const chat = (fields: object) => post('/chat', { model: 'm', messages: [{ role: 'user', content: 'hi' }], ...fields });
const completions = (fields: object) => post('/completions', { model: 'm', prompt: 'hi', ...fields });

describe('the chat completions body', () => {
  it('accepts a minimal body and keeps fields it does not describe (tools, user, logprobs)', async () => {
    const answer = await chat({ user: 'u', tools: [], logprobs: true });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ user: 'u', tools: [], logprobs: true });
  });

  it('accepts string, null and text-part content, and nulls for every optional field', async () => {
    const messages = [
      { role: 'system', content: 'a' },
      { role: 'assistant', content: null },
      { role: 'user', content: [{ type: 'text', text: 'b' }] },
    ];
    const nulls = { max_tokens: null, max_completion_tokens: null, n: null, stop: null, temperature: null, seed: null, stream: null, stream_options: null };
    expect((await chat({ messages, ...nulls })).status).toBe(200);
  });

  it.each([
    [{ model: '' }, 'body/model must NOT have fewer than 1 characters'],
    [{ messages: [] }, 'body/messages must NOT have fewer than 1 items'],
    [{ messages: 'hi' }, 'body/messages must be array'],
    [{ messages: [{ content: 'hi' }] }, "body/messages/0 must have required property 'role'"],
    [{ messages: [{ role: 'user', content: [{ text: 'x' }] }] }, 'body/messages/0/content'],
    [{ max_completion_tokens: 0 }, 'body/max_completion_tokens must be >= 1'],
    [{ max_tokens: 4_294_967_296 }, 'body/max_tokens must be <= 4294967295'],
    [{ max_tokens: '5' }, 'body/max_tokens must be integer,null'],
  ])('refuses %j with a 400 naming the field', async (fields, message) => {
    const answer = await chat(fields);
    expect(answer.status).toBe(400);
    expect(answer.message).toContain(message);
  });

  it('requires model and messages', async () => {
    expect((await post('/chat', { messages: [{ role: 'user' }] })).message).toContain("must have required property 'model'");
    expect((await post('/chat', { model: 'm' })).message).toContain("must have required property 'messages'");
  });
});

describe('the completions body', () => {
  it.each([['text'], [['one text']], [[0, 4_294_967_295]]])('accepts the prompt %j', async (prompt) => {
    expect((await completions({ prompt })).status).toBe(200);
  });

  it.each([
    [{ prompt: [] }, 'body/prompt'],
    [{ prompt: [1, 'a'] }, 'body/prompt'],
    [{ prompt: [-1] }, 'body/prompt'],
    [{ prompt: [1.5] }, 'body/prompt'],
    [{ prompt: 7 }, 'body/prompt'],
    [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'body/stop'],
    [{ stop: [1] }, 'body/stop'],
    [{ temperature: 2.5 }, 'body/temperature must be <= 2'],
    [{ temperature: -0.1 }, 'body/temperature must be >= 0'],
    [{ seed: 2_147_483_648 }, 'body/seed must be <= 2147483647'],
    [{ seed: 1.5 }, 'body/seed must be integer,null'],
    [{ n: 1.5 }, 'body/n must be integer,null'],
    [{ stream: 'true' }, 'body/stream must be boolean,null'],
    [{ stream_options: { include_usage: 1 } }, 'body/stream_options/include_usage must be boolean,null'],
  ])('refuses %j with a 400 naming the field', async (fields, message) => {
    const answer = await completions(fields);
    expect(answer.status).toBe(400);
    expect(answer.message).toContain(message);
  });

  it('accepts the bounds themselves: four stop strings, temperature 0 and 2, the int32 seed range', async () => {
    for (const fields of [{ stop: ['a', 'b', 'c', 'd'] }, { temperature: 0 }, { temperature: 2 }, { seed: -2_147_483_648 }, { seed: 2_147_483_647 }]) {
      expect((await completions(fields)).status, JSON.stringify(fields)).toBe(200);
    }
  });
});
