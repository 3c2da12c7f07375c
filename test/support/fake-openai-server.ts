/**
 * A small OpenAI-compatible server for the --openai load tests (node:http on 127.0.0.1, port
 * 0): GET /v1/models, POST /v1/chat/completions and /v1/completions, streamed as SSE (role
 * chunk, N content chunks with a delay, finish chunk, usage when asked for, [DONE]) or as one
 * JSON body. A chosen fraction of requests (spread evenly, so exactly round(n * fraction) of
 * n) or the first few get the overload status with an optional Retry-After, as the frontend
 * does when every worker is busy. It records each request, and counts streams whose client
 * went away before the end.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeOpenAiOptions {
  readonly models?: readonly string[];
  /** Content chunks per answer. */
  readonly chunks?: number;
  readonly wordsPerChunk?: number;
  /** Before the first content chunk (the role chunk goes at once). */
  readonly firstChunkDelayMs?: number;
  /** Between content chunks. */
  readonly chunkDelayMs?: number;
  /** Send `usage` when the client asks for it (stream_options.include_usage) or does not stream. */
  readonly usage?: boolean;
  /** Also put the cumulative usage on every content chunk (vLLM's continuous_usage_stats). */
  readonly usageEveryChunk?: boolean;
  readonly rejectFraction?: number;
  readonly rejectFirst?: number;
  readonly overloadStatus?: number;
  readonly retryAfter?: string | (() => string);
  /** How a stream ends: [DONE] (normal), closed without [DONE], or the socket destroyed after the first content chunk. */
  readonly ending?: 'done' | 'no-done' | 'reset';
}

export interface RecordedRequest {
  readonly at: number;
  readonly path: string;
  readonly body: Record<string, unknown>;
  readonly status: number;
}

export interface FakeOpenAiServer {
  /** http://127.0.0.1:PORT (no /v1). */
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Streams whose client closed the connection before the answer ended. */
  aborted(): number;
  /** Answers still being written. */
  active(): number;
  close(): Promise<void>;
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

export async function startFakeOpenAi(options: FakeOpenAiOptions = {}): Promise<FakeOpenAiServer> {
  const o = {
    models: ['fake-model'],
    chunks: 4,
    wordsPerChunk: 1,
    firstChunkDelayMs: 0,
    chunkDelayMs: 2,
    usage: true,
    usageEveryChunk: false,
    rejectFraction: 0,
    rejectFirst: 0,
    overloadStatus: 529,
    ending: 'done',
    ...options,
  };
  const requests: RecordedRequest[] = [];
  let posts = 0;
  let aborted = 0;
  let active = 0;

  const answer = (res: ServerResponse, path: string, body: Record<string, unknown>): void => {
    const index = posts++;
    const reject = index < o.rejectFirst || Math.floor((index + 1) * o.rejectFraction) > Math.floor(index * o.rejectFraction);
    const record = (status: number): void => void requests.push({ at: performance.now(), path, body, status });
    if (reject) {
      record(o.overloadStatus);
      const retryAfter = typeof o.retryAfter === 'function' ? o.retryAfter() : o.retryAfter;
      json(
        res,
        o.overloadStatus,
        { error: { message: 'Service overloaded: all workers busy', type: 'overloaded', code: o.overloadStatus } },
        retryAfter === undefined ? {} : { 'retry-after': retryAfter },
      );
      return;
    }
    if (!o.models.includes(String(body['model']))) {
      record(404);
      json(res, 404, { error: { message: `model '${String(body['model'])}' not found`, type: 'not_found', code: 404 } });
      return;
    }
    record(200);
    const chat = path === '/v1/chat/completions';
    const stream = body['stream'] === true;
    const wantsUsage = o.usage && (!stream || (body['stream_options'] as { include_usage?: boolean } | undefined)?.include_usage === true);
    const usage = { prompt_tokens: chat ? 0 : String(body['prompt']).split(/\s+/).length, completion_tokens: o.chunks * o.wordsPerChunk, total_tokens: 0 };
    const piece = (k: number): string => Array.from({ length: o.wordsPerChunk }, (_, w) => `w${k}-${w} `).join('');
    const base = { id: `cmpl-${index}`, object: chat ? 'chat.completion.chunk' : 'text_completion', created: 0, model: body['model'] };
    const chunk = (content: string, finish: string | null = null): unknown =>
      chat
        ? { ...base, choices: [{ index: 0, delta: content === '' && finish === null ? { role: 'assistant', content } : { content }, finish_reason: finish }] }
        : { ...base, choices: [{ index: 0, text: content, finish_reason: finish }] };

    active += 1;
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const finish = (): void => {
      if (ended) return;
      ended = true;
      active -= 1;
    };
    res.on('close', () => {
      clearTimeout(timer);
      if (!ended) aborted += 1;
      finish();
    });
    if (!stream) {
      timer = setTimeout(
        () => {
          const text = Array.from({ length: o.chunks }, (_, k) => piece(k)).join('');
          const choice = chat
            ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }
            : { index: 0, text, finish_reason: 'length' };
          finish();
          json(res, 200, { ...base, object: chat ? 'chat.completion' : 'text_completion', choices: [choice], ...(wantsUsage && { usage }) });
        },
        o.firstChunkDelayMs + o.chunks * o.chunkDelayMs,
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (data: unknown): boolean => res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
    res.write(': a comment, as keep-alives are\n\n');
    if (chat) send(chunk(''));
    const next = (k: number): void => {
      if (k === o.chunks) {
        send(chunk('', 'length'));
        if (wantsUsage) send({ ...base, choices: [], usage });
        if (o.ending === 'done') send('[DONE]');
        finish();
        res.end();
        return;
      }
      const content = chunk(piece(k)) as Record<string, unknown>;
      send(o.usageEveryChunk ? { ...content, usage: { ...usage, completion_tokens: (k + 1) * o.wordsPerChunk } } : content);
      if (o.ending === 'reset') {
        res.socket?.destroy();
        return;
      }
      timer = setTimeout(() => next(k + 1), o.chunkDelayMs);
    };
    timer = setTimeout(() => next(0), o.firstChunkDelayMs);
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'GET' && path === '/v1/models') {
      json(res, 200, { object: 'list', data: o.models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fake' })) });
      return;
    }
    if (req.method !== 'POST' || (path !== '/v1/chat/completions' && path !== '/v1/completions')) {
      json(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      return;
    }
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (text += d));
    req.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        json(res, 400, { error: { message: 'invalid JSON' } });
        return;
      }
      answer(res, path, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    aborted: () => aborted,
    active: () => active,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
