// One HTTP attempt of the --openai mode, with fetch stubbed by a response whose body the test
// feeds chunk by chunk, and a hand-driven performance.now(): the request it sends, the one outcome
// for each way an answer ends, token counting (per chunk, or from usage) and timing, the
// Retry-After of a rejection, and the deadline and cancel cutting exactly this request.
import { setImmediate as turn } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startHttpAttempt, type HttpAttemptSpec } from '../../../../src/tools/load/openai-attempt.js';
import type { OpenAiApi } from '../../../../src/tools/load/options.js';
import { LoadRecorder } from '../../../../src/tools/load/stats.js';

/** A response body fed by the test; errors when the request's signal aborts, as fetch's does. */
class Body {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  cancelled = false;
  readonly stream = new ReadableStream<Uint8Array>({
    start: (controller) => {
      this.controller = controller;
    },
    cancel: () => {
      this.cancelled = true;
    },
  });

  push(text: string): void {
    this.controller.enqueue(new TextEncoder().encode(text));
  }
  close(): void {
    this.controller.close();
  }
  error(err: unknown): void {
    this.controller.error(err);
  }
}

interface FetchCall {
  url: string;
  init: RequestInit;
}

const abortError = (): DOMException => new DOMException('This operation was aborted', 'AbortError');

/** fetch answering with `respond`, or hanging until aborted when it returns undefined. */
function stubFetch(respond: (call: FetchCall) => Response | Promise<Response> | undefined): FetchCall[] {
  const calls: FetchCall[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn((url: string, init: RequestInit) => {
      const call = { url, init };
      calls.push(call);
      return new Promise<Response>((resolve, reject) => {
        init.signal?.addEventListener('abort', () => reject(abortError()));
        const answer = respond(call);
        if (answer !== undefined) Promise.resolve(answer).then(resolve, reject);
      });
    }),
  );
  return calls;
}

/** A 200 SSE response whose body the test feeds; the body errors if the request is aborted. */
function streaming(): { body: Body; calls: FetchCall[] } {
  const body = new Body();
  const calls = stubFetch((call) => {
    call.init.signal?.addEventListener('abort', () => body.error(abortError()));
    return new Response(body.stream, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  });
  return { body, calls };
}

let clock = 0;

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  vi.useRealTimers();
});

function start(over: Partial<HttpAttemptSpec> = {}) {
  clock = 0;
  vi.spyOn(performance, 'now').mockImplementation(() => clock);
  const recorder = new LoadRecorder({ httpStatuses: true });
  const spec: HttpAttemptSpec = {
    url: 'http://127.0.0.1:8000/v1/chat/completions',
    body: '{"model":"m"}',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    api: 'chat',
    stream: true,
    deadlineMs: undefined,
    overloadStatuses: new Set([529]),
    retryMaxMs: 5000,
    ...over,
  };
  const attempt = startHttpAttempt(spec, recorder);
  return { attempt, recorder, spec };
}

/** Lets the attempt read what was pushed (stream reads settle within a few turns). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await turn();
}

const delta = (content: string | undefined, api: OpenAiApi = 'chat', usage?: number): string => {
  const choice = api === 'chat' ? { index: 0, delta: content === undefined ? { role: 'assistant' } : { content } } : { index: 0, text: content };
  return `data: ${JSON.stringify({ choices: [choice], ...(usage !== undefined && { usage: { completion_tokens: usage } }) })}\n\n`;
};
const usageChunk = (n: number): string => `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: n } })}\n\n`;
const DONE = 'data: [DONE]\n\n';

describe('startHttpAttempt request', () => {
  it('POSTs the body with the headers to the URL, with a signal of its own', async () => {
    const { body, calls } = streaming();
    const { attempt, spec } = start();
    body.push(DONE);
    await attempt.done;
    expect(calls).toHaveLength(1);
    expect(calls[0]!.url).toBe(spec.url);
    expect(calls[0]!.init).toMatchObject({ method: 'POST', headers: spec.headers, body: spec.body });
    expect(calls[0]!.init.signal).toBeInstanceOf(AbortSignal);
  });
});

describe('startHttpAttempt failures before a body', () => {
  it.each([
    ['ECONNREFUSED', 'NETWORK_ECONNREFUSED'],
    ['UND_ERR_SOCKET', 'NETWORK_UND_ERR_SOCKET'],
    ['econnreset', 'NETWORK_ERROR'],
    ['A'.repeat(41), 'NETWORK_ERROR'],
    ['E CONN', 'NETWORK_ERROR'],
  ])("labels fetch's cause code %j as %s", async (code, label) => {
    stubFetch(() => Promise.reject(new TypeError('fetch failed', { cause: Object.assign(new Error('x'), { code }) })));
    const { attempt, recorder } = start();
    expect(await attempt.done).toEqual({ outcome: { kind: 'error', label }, pushback: undefined });
    expect(recorder.summary('u', 1000).statuses).toEqual({});
  });

  it('labels a network error without a code NETWORK_ERROR', async () => {
    stubFetch(() => Promise.reject(new TypeError('fetch failed')));
    expect((await start().attempt.done).outcome).toEqual({ kind: 'error', label: 'NETWORK_ERROR' });
  });

  it('labels another status HTTP_<status>, counts the status, and reads the error body', async () => {
    const body = new Body();
    stubFetch(() => new Response(body.stream, { status: 404 }));
    const { attempt, recorder } = start();
    body.push('{"error":"no such model"}');
    await settle();
    let done = false;
    void attempt.done.then(() => (done = true));
    await settle();
    expect(done).toBe(false); // still reading the body, so the connection can be reused
    body.close();
    expect(await attempt.done).toEqual({ outcome: { kind: 'error', label: 'HTTP_404' }, pushback: undefined });
    expect(recorder.summary('u', 1000).statuses).toEqual({ '404': 1 });
  });
});

describe('startHttpAttempt rejections', () => {
  it('counts an overload status as rejected, with its Retry-After as the pushback', async () => {
    stubFetch(() => new Response('busy', { status: 529, headers: { 'retry-after': '2' } }));
    const { attempt, recorder } = start();
    expect(await attempt.done).toEqual({ outcome: { kind: 'rejected' }, pushback: 2000 });
    expect(recorder.summary('u', 1000).statuses).toEqual({ '529': 1 });
  });

  it('takes any of the overload statuses it was given, and not 529 when it was not', async () => {
    stubFetch(() => new Response('', { status: 503 }));
    expect((await start({ overloadStatuses: new Set([529, 503]) }).attempt.done).outcome).toEqual({ kind: 'rejected' });
    stubFetch(() => new Response('', { status: 529 }));
    expect((await start({ overloadStatuses: new Set([503]) }).attempt.done).outcome).toEqual({ kind: 'error', label: 'HTTP_529' });
  });

  it('counts 429 (a tenant at its in-flight cap) as a rejection of its own, with its Retry-After, whatever the overload statuses', async () => {
    stubFetch(() => new Response('slow down', { status: 429, headers: { 'retry-after': '1' } }));
    const { attempt, recorder } = start({ overloadStatuses: new Set([503]) });
    expect(await attempt.done).toEqual({ outcome: { kind: 'rejected', tenantCapped: true }, pushback: 1000 });
    recorder.attemptStarted(false);
    recorder.attemptEnded((await attempt.done).outcome, 3);
    expect(recorder.summary('u', 1000)).toMatchObject({ rejected: 1, tenant_capped: 1, statuses: { '429': 1 }, errors: {} });
  });

  it('caps the Retry-After at retryMaxMs, and has no pushback without a valid one', async () => {
    stubFetch(() => new Response('', { status: 529, headers: { 'retry-after': '3600' } }));
    expect((await start({ retryMaxMs: 800 }).attempt.done).pushback).toBe(800);
    stubFetch(() => new Response('', { status: 529, headers: { 'retry-after': 'soon' } }));
    expect((await start().attempt.done).pushback).toBeUndefined();
    stubFetch(() => new Response('', { status: 529 }));
    expect((await start().attempt.done).pushback).toBeUndefined();
  });

  it('reads an HTTP-date Retry-After against the wall clock', async () => {
    vi.spyOn(Date, 'now').mockReturnValue(Date.parse('2026-01-05T10:00:00Z'));
    stubFetch(() => new Response('', { status: 529, headers: { 'retry-after': 'Mon, 05 Jan 2026 10:00:03 GMT' } }));
    expect((await start().attempt.done).pushback).toBe(3000);
  });
});

describe('startHttpAttempt streamed answers', () => {
  it('completes at data: [DONE], timing the first content chunk and one ITL sample per chunk', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start();
    clock = 5;
    body.push(delta(undefined)); // the role chunk carries no content
    body.push(delta(''));
    await settle();
    clock = 30;
    body.push(delta('Hello'));
    await settle();
    clock = 50;
    body.push(delta(' world'));
    await settle();
    clock = 80;
    body.push(delta('!') + DONE);
    // Its own timing, for the SLO: first token at 30, then 2 gaps to 80.
    expect(await attempt.done).toEqual({ outcome: { kind: 'completed', timing: { ttftMs: 30, meanItlMs: 25 } }, pushback: undefined });
    const s = recorder.summary('u', 1000);
    expect(s.ttft_ms.p50).toBe(30);
    expect(s.itl_ms).toEqual({ p50: 20, p90: 30, p99: 30 });
    expect(s.output_tokens).toBe(3);
    expect(s.statuses).toEqual({ '200': 1 });
  });

  it('corrects the token count to the final usage', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start();
    body.push(delta('a b') + delta('c d') + usageChunk(4) + DONE);
    await attempt.done;
    expect(recorder.outputTokens).toBe(4);
  });

  it('counts each chunk by the growth of a usage sent on every chunk, and spreads its gap over those tokens', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start();
    clock = 10;
    body.push(delta('ab', 'chat', 2));
    await settle();
    clock = 40;
    body.push(delta('cde', 'chat', 5));
    await settle();
    body.push(delta('', 'chat', 5) + usageChunk(5) + DONE);
    await attempt.done;
    const s = recorder.summary('u', 1000);
    expect(s.output_tokens).toBe(5);
    expect(s.ttft_ms.p50).toBe(10);
    expect(s.itl_ms).toEqual({ p50: 10, p90: 10, p99: 10 }); // 30 ms over 3 tokens
  });

  it('ignores a usage that is no count', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start();
    body.push(delta('a', 'chat', -1) + delta('b', 'chat', 1.5) + DONE);
    await attempt.done;
    expect(recorder.outputTokens).toBe(2);
  });

  it('reads completions chunks by their text', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start({ api: 'completions' });
    body.push(delta('one', 'completions') + delta(undefined, 'completions') + delta('two', 'completions') + DONE);
    expect((await attempt.done).outcome).toMatchObject({ kind: 'completed' });
    expect(recorder.outputTokens).toBe(2);
  });

  it('stops reading at [DONE] and cancels the rest of the body', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start();
    body.push(DONE + delta('late'));
    await attempt.done;
    await settle();
    expect(body.cancelled).toBe(true);
    expect(recorder.outputTokens).toBe(0);
  });

  it.each([
    ['a chunk that is not JSON', 'data: {"choices":\n\n', 'BAD_CHUNK'],
    ['an error event', 'event: error\ndata: {"message":"engine died"}\n\n', 'STREAM_ERROR'],
    ['a chunk with an error field', 'data: {"error":{"message":"overloaded"}}\n\n', 'STREAM_ERROR'],
  ])('ends with %s as an error, not reading further', async (_what, text, label) => {
    const { body } = streaming();
    const { attempt } = start();
    body.push(delta('x') + text + DONE);
    expect((await attempt.done).outcome).toEqual({ kind: 'error', label });
    await settle();
    expect(body.cancelled).toBe(true);
  });

  it('is STREAM_INCOMPLETE when the body ends without [DONE], even mid-event', async () => {
    const { body } = streaming();
    const { attempt, recorder } = start();
    body.push(delta('x') + 'data: [DONE]');
    body.close();
    expect((await attempt.done).outcome).toEqual({ kind: 'error', label: 'STREAM_INCOMPLETE' });
    expect(recorder.outputTokens).toBe(1);
  });

  it('is STREAM_BROKEN when the body fails mid-answer', async () => {
    const { body } = streaming();
    const { attempt } = start();
    body.push(delta('x'));
    await settle();
    body.error(new TypeError('terminated'));
    expect((await attempt.done).outcome).toEqual({ kind: 'error', label: 'STREAM_BROKEN' });
  });

  it('reads [DONE] split across network reads', async () => {
    const { body } = streaming();
    const { attempt } = start();
    body.push('data: [DO');
    await settle();
    body.push('NE]\r');
    await settle();
    body.push('\n\r\n');
    expect((await attempt.done).outcome).toEqual({ kind: 'completed', timing: undefined });
  });
});

describe('startHttpAttempt JSON answers (--no-stream)', () => {
  const answer = (body: string) => stubFetch(() => new Response(body, { status: 200, headers: { 'content-type': 'application/json' } }));

  it('completes with the usage as the token count, timing the whole answer as TTFT', async () => {
    answer(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'a b c' } }], usage: { completion_tokens: 3 } }));
    const { attempt, recorder } = start({ stream: false });
    clock = 120;
    expect((await attempt.done).outcome).toEqual({ kind: 'completed', timing: { ttftMs: 120, meanItlMs: undefined } });
    const s = recorder.summary('u', 1000);
    expect(s.output_tokens).toBe(3);
    expect(s.ttft_ms.p50).toBe(120);
    expect(s.itl_ms.p50).toBeNull();
  });

  it('counts one token without usage, and none (no TTFT) for empty content', async () => {
    answer(JSON.stringify({ choices: [{ text: 'hello there' }] }));
    const one = start({ stream: false, api: 'completions' });
    await one.attempt.done;
    expect(one.recorder.outputTokens).toBe(1);
    answer(JSON.stringify({ choices: [{ message: { content: '' } }] }));
    const none = start({ stream: false });
    expect((await none.attempt.done).outcome).toEqual({ kind: 'completed', timing: undefined });
    expect(none.recorder.summary('u', 1000)).toMatchObject({ output_tokens: 0, ttft_ms: { p50: null } });
  });

  it.each([
    ['not JSON', 'oops'],
    ['no choices', '{"id":"x"}'],
    ['a chat answer without content', '{"choices":[{"message":{"role":"assistant"}}]}'],
    ['a completions-shaped answer to chat', '{"choices":[{"text":"hi"}]}'],
    ['JSON null', 'null'],
  ])('is BAD_RESPONSE for %s', async (_what, text) => {
    answer(text);
    expect((await start({ stream: false }).attempt.done).outcome).toEqual({ kind: 'error', label: 'BAD_RESPONSE' });
  });
});

describe('startHttpAttempt deadline and cancel', () => {
  it('is DEADLINE_EXCEEDED when the deadline passes before the answer, and aborts the request', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const calls = stubFetch(() => undefined);
    const { attempt } = start({ deadlineMs: 300 });
    vi.advanceTimersByTime(299);
    expect(calls[0]!.init.signal!.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(calls[0]!.init.signal!.aborted).toBe(true);
    expect(await attempt.done).toEqual({ outcome: { kind: 'error', label: 'DEADLINE_EXCEEDED' }, pushback: undefined });
  });

  it('is DEADLINE_EXCEEDED when the deadline passes mid-stream', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { body } = streaming();
    const { attempt, recorder } = start({ deadlineMs: 1000 });
    body.push(delta('x'));
    await settle();
    vi.advanceTimersByTime(1000);
    expect((await attempt.done).outcome).toEqual({ kind: 'error', label: 'DEADLINE_EXCEEDED' });
    expect(recorder.outputTokens).toBe(1);
  });

  it('clears its deadline timer once the attempt is done', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    stubFetch(() => new Response('', { status: 529 }));
    const { attempt } = start({ deadlineMs: 60_000 });
    expect(vi.getTimerCount()).toBe(1);
    await attempt.done;
    expect(vi.getTimerCount()).toBe(0);
  });

  it('is CANCELLED when cancelled, before or during the answer, and stays so if the deadline passes after', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    stubFetch(() => undefined);
    const before = start({ deadlineMs: 100 });
    before.attempt.cancel();
    vi.advanceTimersByTime(100);
    expect((await before.attempt.done).outcome).toEqual({ kind: 'error', label: 'CANCELLED' });

    const { body } = streaming();
    const during = start();
    body.push(delta('x'));
    await settle();
    during.attempt.cancel();
    expect((await during.attempt.done).outcome).toEqual({ kind: 'error', label: 'CANCELLED' });
  });
});
