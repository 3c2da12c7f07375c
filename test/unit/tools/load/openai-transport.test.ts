// The --openai transport with fetch stubbed and startHttpAttempt replaced by a recorder: the
// model lookup (GET /v1/models) and each way it fails, and the requests it builds for chat and
// completions, streamed or not, drawn from the run's seeded stream.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import type { HttpAttemptSpec } from '../../../../src/tools/load/openai-attempt.js';
import { firstModel, openAiTransport, promptText } from '../../../../src/tools/load/openai-transport.js';
import { resolveLoadOptions, type LoadOptions } from '../../../../src/tools/load/options.js';
import { LoadRecorder } from '../../../../src/tools/load/stats.js';
import { LoadSetupError } from '../../../../src/tools/load/transport.js';

const specs = vi.hoisted(() => [] as unknown[]);

vi.mock('../../../../src/tools/load/openai-attempt.js', () => ({
  startHttpAttempt: (spec: unknown) => {
    specs.push(spec);
    return { done: new Promise(() => {}), cancel: () => {} };
  },
}));

const BASE = 'http://127.0.0.1:8000/v1';

interface FetchCall {
  url: string;
  init: RequestInit | undefined;
}

function stubFetch(answer: (call: FetchCall) => Response | Promise<Response>): FetchCall[] {
  const calls: FetchCall[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn((url: string, init?: RequestInit) => {
      const call = { url, init };
      calls.push(call);
      return Promise.resolve().then(() => answer(call));
    }),
  );
  return calls;
}

const json = (body: unknown, status = 200): Response => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

beforeEach(() => {
  specs.length = 0;
});
afterEach(() => {
  vi.unstubAllGlobals();
});

async function setupError(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(LoadSetupError);
  return (error as LoadSetupError).message;
}

describe('promptText', () => {
  it('is empty for no words, and draws each word from the random stream', () => {
    expect(promptText(0, mulberry32(1))).toBe('');
    expect(promptText(3, () => 0)).toBe('the the the');
    expect(promptText(1, () => 0.999_999)).toBe('want');
  });
});

describe('firstModel', () => {
  it('asks GET {base}/models for JSON and takes the first model id', async () => {
    const calls = stubFetch(() => json({ object: 'list', data: [{ id: 'qwen' }, { id: 'llama' }] }));
    await expect(firstModel(BASE)).resolves.toBe('qwen');
    expect(calls).toHaveLength(1);
    expect(calls[0]!.url).toBe(`${BASE}/models`);
    expect(calls[0]!.init?.headers).toEqual({ accept: 'application/json' });
    expect(calls[0]!.init?.signal).toBeInstanceOf(AbortSignal);
  });

  it('skips entries without a usable id', async () => {
    stubFetch(() => json({ data: [null, {}, { id: '' }, { id: 7 }, { id: 'm' }] }));
    await expect(firstModel(BASE)).resolves.toBe('m');
  });

  it.each([
    ['an empty list', { data: [] }],
    ['no data', {}],
    ['data that is no list', { data: { id: 'm' } }],
    ['only unusable ids', { data: [{ id: '' }, { name: 'm' }] }],
  ])('says no model is registered yet for %s', async (_what, body) => {
    stubFetch(() => json(body));
    expect(await setupError(firstModel(BASE))).toBe(`GET ${BASE}/models lists no models (no worker registered yet?); name one with --model`);
  });

  it('names the HTTP status of an answer other than 200', async () => {
    stubFetch(() => json({ data: [{ id: 'm' }] }, 503));
    expect(await setupError(firstModel(BASE))).toBe(`GET ${BASE}/models answered HTTP 503; name the model with --model`);
  });

  it('says so when the answer is not JSON', async () => {
    stubFetch(() => new Response('<html>', { status: 200 }));
    expect(await setupError(firstModel(BASE))).toBe(`GET ${BASE}/models did not answer JSON; name the model with --model`);
  });

  it("names the network error's code, else its cause's message, else its own message", async () => {
    stubFetch(() => Promise.reject(new TypeError('fetch failed', { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) })));
    expect(await setupError(firstModel(BASE))).toBe(`cannot list models at ${BASE}/models: ECONNREFUSED; is the server up? (or name one with --model)`);
    stubFetch(() => Promise.reject(new TypeError('fetch failed', { cause: new Error('other side closed') })));
    expect(await setupError(firstModel(BASE))).toMatch(/: other side closed; is the server up\?/);
    stubFetch(() => Promise.reject(new Error('boom')));
    expect(await setupError(firstModel(BASE))).toMatch(/: boom; is the server up\?/);
  });

  it('gives up, saying it was stopped, when the caller aborts while waiting', async () => {
    const abort = new AbortController();
    const calls = stubFetch(
      (call) =>
        new Promise<Response>((_resolve, reject) => {
          call.init!.signal!.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
        }),
    );
    const pending = firstModel(BASE, abort.signal);
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    expect(calls[0]!.init!.signal!.aborted).toBe(false);
    abort.abort();
    expect(await setupError(pending)).toBe(`stopped while listing models at ${BASE}/models`);
  });
});

describe('openAiTransport', () => {
  const options = (over: Partial<LoadOptions> = {}): LoadOptions => resolveLoadOptions({ openai: 'http://127.0.0.1:8000', model: 'm', seed: 3, ...over });
  const lastSpec = (): HttpAttemptSpec => specs[specs.length - 1] as HttpAttemptSpec;
  const bodyOf = (spec: HttpAttemptSpec): Record<string, unknown> => JSON.parse(spec.body) as Record<string, unknown>;

  it('uses --model without asking the server', async () => {
    const calls = stubFetch(() => json({ data: [{ id: 'other' }] }));
    const transport = await openAiTransport(options(), mulberry32(3), new LoadRecorder());
    expect(calls).toHaveLength(0);
    expect(transport.describe).toEqual({ model: 'm', api: 'chat' });
  });

  it('asks the server for the model when none is given, and fails the setup when it names none', async () => {
    stubFetch(() => json({ data: [{ id: 'served' }] }));
    const transport = await openAiTransport(options({ model: undefined }), mulberry32(3), new LoadRecorder());
    expect(transport.describe?.model).toBe('served');
    transport.prepare(0)();
    expect(bodyOf(lastSpec())['model']).toBe('served');
    stubFetch(() => json({ data: [] }));
    await expect(openAiTransport(options({ model: undefined }), mulberry32(3), new LoadRecorder())).rejects.toBeInstanceOf(LoadSetupError);
  });

  it('streams chat: one user message, usage asked for, SSE accepted', async () => {
    const transport = await openAiTransport(options({ promptTokens: { min: 4, max: 4 }, maxTokens: { min: 9, max: 9 } }), mulberry32(3), new LoadRecorder());
    expect(transport.target).toBe(`${BASE}/chat/completions`);
    transport.prepare(0)();
    const spec = lastSpec();
    expect(spec).toMatchObject({ url: `${BASE}/chat/completions`, api: 'chat', stream: true });
    expect(spec.headers).toEqual({ 'content-type': 'application/json', accept: 'text/event-stream' });
    const body = bodyOf(spec);
    expect(Object.keys(body)).toEqual(['model', 'messages', 'max_tokens', 'stream', 'stream_options']);
    expect(body).toMatchObject({ model: 'm', max_tokens: 9, stream: true, stream_options: { include_usage: true } });
    const messages = body['messages'] as { role: string; content: string }[];
    expect(messages).toHaveLength(1);
    expect(messages[0]!.role).toBe('user');
    expect(messages[0]!.content.split(' ')).toHaveLength(4);
  });

  it('sends completions a prompt, and without streaming asks for JSON with stream false', async () => {
    const transport = await openAiTransport(
      options({ api: 'completions', stream: false, promptTokens: { min: 6, max: 6 } }),
      mulberry32(3),
      new LoadRecorder(),
    );
    expect(transport.target).toBe(`${BASE}/completions`);
    transport.prepare(0)();
    const spec = lastSpec();
    expect(spec.headers['accept']).toBe('application/json');
    const body = bodyOf(spec);
    expect(body).not.toHaveProperty('messages');
    expect(body).not.toHaveProperty('stream_options');
    expect(body['stream']).toBe(false);
    expect((body['prompt'] as string).split(' ')).toHaveLength(6);
  });

  it('sends the priority and the tenant as headers, the body unchanged', async () => {
    const plain = await openAiTransport(options(), mulberry32(3), new LoadRecorder());
    plain.prepare(0)();
    const without = lastSpec();
    const transport = await openAiTransport(options({ priority: 1, tenant: 'noisy' }), mulberry32(3), new LoadRecorder());
    transport.prepare(0)();
    const spec = lastSpec();
    expect(spec.headers).toEqual({ ...without.headers, 'x-request-priority': '1', 'x-tenant-id': 'noisy' });
    expect(spec.body).toBe(without.body);
  });

  it('passes the deadline, the overload statuses and the Retry-After cap to each attempt', async () => {
    const transport = await openAiTransport(
      resolveLoadOptions({ openai: 'http://h:1', model: 'm', deadlineMs: 1234, retryMaxMs: 800, overloadStatuses: [529, 503] }),
      mulberry32(3),
      new LoadRecorder(),
    );
    transport.prepare(0)();
    const spec = lastSpec();
    expect(spec.deadlineMs).toBe(1234);
    expect(spec.retryMaxMs).toBe(800);
    expect([...spec.overloadStatuses].sort()).toEqual([503, 529]);
    expect(spec.overloadStatuses.has(500)).toBe(false);
  });

  it('draws prompt and max_tokens in range at prepare time, the same for the same seed', async () => {
    const over = { promptTokens: { min: 2, max: 30 }, maxTokens: { min: 1, max: 50 } };
    const bodies = async (seed: number, order: number[]): Promise<string[]> => {
      const transport = await openAiTransport(options(over), mulberry32(seed), new LoadRecorder());
      const starts = [0, 1, 2, 3].map((i) => transport.prepare(i));
      const out: string[] = [];
      for (const i of order) {
        starts[i]!();
        out[i] = lastSpec().body;
      }
      transport.close();
      return out;
    };
    const a = await bodies(3, [0, 1, 2, 3]);
    expect(await bodies(3, [3, 1, 0, 2])).toEqual(a);
    expect(await bodies(4, [0, 1, 2, 3])).not.toEqual(a);
    for (const text of a) {
      const body = JSON.parse(text) as { messages: { content: string }[]; max_tokens: number };
      const words = body.messages[0]!.content.split(' ').length;
      expect(words).toBeGreaterThanOrEqual(2);
      expect(words).toBeLessThanOrEqual(30);
      expect(body.max_tokens).toBeGreaterThanOrEqual(1);
      expect(body.max_tokens).toBeLessThanOrEqual(50);
    }
  });

  it('passes the stop signal to the model lookup', async () => {
    const abort = new AbortController();
    abort.abort();
    stubFetch((call) => (call.init!.signal!.aborted ? Promise.reject(new DOMException('aborted', 'AbortError')) : json({ data: [{ id: 'm' }] })));
    await expect(openAiTransport(options({ model: undefined }), mulberry32(3), new LoadRecorder(), abort.signal)).rejects.toThrow(
      /^stopped while listing models/,
    );
  });
});
