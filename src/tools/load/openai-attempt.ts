/**
 * One HTTP attempt of the --openai mode: POSTs the body with Node's fetch (one AbortController
 * per attempt, so a stop or a --deadline-ms cuts exactly this request), times the first
 * content chunk and the gaps between content chunks, and reports exactly one outcome:
 * completed (200 and `data: [DONE]`, or the JSON body with --no-stream), rejected (an
 * overload status, or 429 for a tenant at its in-flight cap, with its Retry-After), or an
 * error labelled by what went wrong.
 */
import type { RunningAttempt, AttemptResult } from './attempt.js';
import { HTTP_TENANT_CAPPED, type OpenAiApi } from './options.js';
import { parseRetryAfter } from './retry.js';
import { SseParser } from './sse.js';
import type { LoadRecorder, TokenTiming } from './stats.js';
import { TokenClock } from './token-clock.js';

export interface HttpAttemptSpec {
  readonly url: string;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly api: OpenAiApi;
  readonly stream: boolean;
  readonly deadlineMs: number | undefined;
  readonly overloadStatuses: ReadonlySet<number>;
  /** Cap of a Retry-After, so a server's "come back in an hour" cannot stall the run. */
  readonly retryMaxMs: number;
}

const error = (label: string): AttemptResult => ({ outcome: { kind: 'error', label }, pushback: undefined });
const completed = (timing: TokenTiming | undefined): AttemptResult => ({ outcome: { kind: 'completed', timing }, pushback: undefined });

/** NETWORK_<code> from fetch's TypeError('fetch failed', { cause }): ECONNREFUSED, UND_ERR_SOCKET, ... */
function networkLabel(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown } } | undefined)?.cause;
  const code = typeof cause?.code === 'string' ? cause.code : undefined;
  return code !== undefined && /^[A-Z0-9_]{1,40}$/.test(code) ? `NETWORK_${code}` : 'NETWORK_ERROR';
}

type Json = Record<string, unknown> | undefined;
const field = (value: unknown, key: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined);
const completionTokens = (message: Json): number | undefined => {
  const n = field(field(message, 'usage'), 'completion_tokens');
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? n : undefined;
};

/** The generated text a chunk (or, with `whole`, a non-streamed body) carries. */
function contentOf(message: Json, api: OpenAiApi, whole: boolean): string | undefined {
  const choice = (field(message, 'choices') as unknown[] | undefined)?.[0];
  const text = api === 'chat' ? field(field(choice, whole ? 'message' : 'delta'), 'content') : field(choice, 'text');
  return typeof text === 'string' ? text : undefined;
}

async function readStream(response: Response, spec: HttpAttemptSpec, clock: TokenClock, recorder: LoadRecorder): Promise<AttemptResult> {
  const parser = new SseParser();
  // Cumulative completion_tokens seen so far: servers that send usage on every chunk let us
  // count each chunk's tokens; otherwise a content chunk counts as one token.
  let usage: number | undefined;
  const onData = (data: string, event: string): AttemptResult | undefined => {
    if (data === '[DONE]') {
      if (usage !== undefined) recorder.tokensReceived(usage - clock.counted);
      return completed(clock.timing);
    }
    let chunk: Json;
    try {
      chunk = JSON.parse(data) as Json;
    } catch {
      return error('BAD_CHUNK');
    }
    if (event === 'error' || field(chunk, 'error') !== undefined) return error('STREAM_ERROR');
    const total = completionTokens(chunk);
    const content = contentOf(chunk, spec.api, false);
    if (content !== undefined && content.length > 0) clock.tokens(total !== undefined && total > (usage ?? 0) ? total - (usage ?? 0) : 1);
    if (total !== undefined) usage = total;
    return undefined;
  };
  // undici types the body ReadableStream<any>; fetch's body streams bytes.
  const reader = (response.body! as ReadableStream<Uint8Array>).getReader();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const events = done ? parser.end() : parser.pushBytes(value);
      for (const e of events) {
        const result = onData(e.data, e.event);
        if (result !== undefined) return result;
      }
      if (done) {
        finished = true;
        return error('STREAM_INCOMPLETE'); // ended without data: [DONE]
      }
    }
  } finally {
    // After [DONE] (or a bad chunk) the rest of the body is not needed.
    if (!finished) reader.cancel().catch(() => {});
  }
}

async function readJson(response: Response, spec: HttpAttemptSpec, startedAt: number, recorder: LoadRecorder): Promise<AttemptResult> {
  const text = await response.text();
  let body: Json;
  try {
    body = JSON.parse(text) as Json;
  } catch {
    return error('BAD_RESPONSE');
  }
  const content = contentOf(body, spec.api, true);
  if (content === undefined) return error('BAD_RESPONSE');
  // Only TTFT is measured without streaming: the time to the whole answer.
  const tokens = completionTokens(body) ?? (content.length > 0 ? 1 : 0);
  const ttftMs = performance.now() - startedAt;
  if (tokens > 0) recorder.ttftSample(ttftMs);
  recorder.tokensReceived(tokens);
  return completed(tokens > 0 ? { ttftMs, meanItlMs: undefined } : undefined);
}

export function startHttpAttempt(spec: HttpAttemptSpec, recorder: LoadRecorder): RunningAttempt {
  const controller = new AbortController();
  let cut: 'CANCELLED' | 'DEADLINE_EXCEEDED' | undefined;
  const abort = (why: 'CANCELLED' | 'DEADLINE_EXCEEDED'): void => {
    cut ??= why;
    controller.abort();
  };
  const timer = spec.deadlineMs === undefined ? undefined : setTimeout(() => abort('DEADLINE_EXCEEDED'), spec.deadlineMs);
  const startedAt = performance.now();
  const attempt = async (): Promise<AttemptResult> => {
    let response: Response;
    try {
      response = await fetch(spec.url, { method: 'POST', headers: spec.headers, body: spec.body, signal: controller.signal });
    } catch (err) {
      return error(cut ?? networkLabel(err));
    }
    recorder.httpStatus(response.status);
    if (response.status !== 200) {
      // Read the (small) error body so that the connection can carry the next request.
      await response.arrayBuffer().catch(() => undefined);
      const tenantCapped = response.status === HTTP_TENANT_CAPPED;
      if (!tenantCapped && !spec.overloadStatuses.has(response.status)) return error(`HTTP_${response.status}`);
      const retryAfter = parseRetryAfter(response.headers.get('retry-after'), Date.now());
      return {
        outcome: tenantCapped ? { kind: 'rejected', tenantCapped } : { kind: 'rejected' },
        pushback: retryAfter === undefined ? undefined : Math.min(retryAfter, spec.retryMaxMs),
      };
    }
    try {
      if (spec.stream) return await readStream(response, spec, new TokenClock(startedAt, recorder), recorder);
      return await readJson(response, spec, startedAt, recorder);
    } catch {
      return error(cut ?? 'STREAM_BROKEN');
    }
  };
  const done = attempt().finally(() => clearTimeout(timer));
  return { done, cancel: () => abort('CANCELLED') };
}
