// runLoad --openai against a fake OpenAI-compatible server: counts, timing, request bodies,
// 529s and Retry-After, error labels, and stops that abort in-flight fetches.
import { describe, expect, it } from 'vitest';
import { runLoad } from '../../../../src/tools/load/run.js';
import type { LoadSummary } from '../../../../src/tools/load/stats.js';
import { LoadSetupError } from '../../../../src/tools/load/transport.js';
import { startFakeOpenAi, type FakeOpenAiOptions, type FakeOpenAiServer } from '../../../support/fake-openai-server.js';
import { waitFor } from '../../../support/wait.js';

const errorsTotal = (s: LoadSummary): number => Object.values(s.errors).reduce((a, b) => a + b, 0);
const words = (text: unknown): number => String(text).split(/\s+/).length;

async function withServer<T>(options: FakeOpenAiOptions, fn: (server: FakeOpenAiServer) => Promise<T>): Promise<T> {
  const server = await startFakeOpenAi(options);
  try {
    return await fn(server);
  } finally {
    await server.close();
  }
}

/** Gaps between consecutive requests the server received, in ms. */
const gaps = (server: FakeOpenAiServer): number[] => server.requests.slice(1).map((r, i) => r.at - server.requests[i]!.at);

describe('runLoad --openai: answers', () => {
  it('streams chat completions: exact counts, TTFT to the first content chunk, ITL per token, the request body', async () => {
    await withServer({ chunks: 5, firstChunkDelayMs: 40, chunkDelayMs: 3 }, async (server) => {
      const progress: number[] = [];
      const s = await runLoad(
        { openai: server.url, concurrency: 4, count: 12, promptTokens: { min: 7, max: 7 }, maxTokens: { min: 9, max: 9 }, progressIntervalMs: 20 },
        { onProgress: (p) => progress.push(p.sent) },
      );
      expect(s).toMatchObject({
        target: `${server.url}/v1/chat/completions`,
        model: 'fake-model',
        api: 'chat',
        sent: 12,
        completed: 12,
        rejected: 0,
        errors: {},
        statuses: { '200': 12 },
        retries: 0,
      });
      expect(s.output_tokens).toBe(60);
      // The role chunk (empty content) goes at once: counting it would put TTFT near 0.
      expect(s.ttft_ms.p50!).toBeGreaterThanOrEqual(39);
      expect(s.itl_ms.p50!).toBeGreaterThan(1);
      expect(s.itl_ms.p50!).toBeLessThan(30);
      expect(progress.length).toBeGreaterThan(0);
      expect(server.requests).toHaveLength(12);
      for (const { path, body } of server.requests) {
        expect(path).toBe('/v1/chat/completions');
        expect(body).toMatchObject({ model: 'fake-model', max_tokens: 9, stream: true, stream_options: { include_usage: true } });
        const messages = body['messages'] as { role: string; content: string }[];
        expect(messages).toHaveLength(1);
        expect(messages[0]!.role).toBe('user');
        expect(words(messages[0]!.content)).toBe(7);
      }
    });
  });

  it('takes output tokens from the final usage, else counts content chunks', async () => {
    await withServer({ chunks: 4, wordsPerChunk: 3, chunkDelayMs: 1 }, async (server) => {
      expect((await runLoad({ openai: server.url, concurrency: 3, count: 3 })).output_tokens).toBe(36);
    });
    await withServer({ chunks: 4, wordsPerChunk: 3, chunkDelayMs: 1, usage: false }, async (server) => {
      expect((await runLoad({ openai: server.url, concurrency: 3, count: 3 })).output_tokens).toBe(12);
    });
  });

  it("spreads a chunk's gap over its tokens when every chunk carries the running usage", async () => {
    // 3 tokens per chunk, 30 ms apart: 10 ms per token when counted, 30 ms per chunk when not.
    const options = { chunks: 4, wordsPerChunk: 3, chunkDelayMs: 30 };
    await withServer({ ...options, usageEveryChunk: true }, async (server) => {
      const s = await runLoad({ openai: server.url, count: 2 });
      expect(s.output_tokens).toBe(24);
      expect(s.itl_ms.p50!).toBeGreaterThanOrEqual(8);
      expect(s.itl_ms.p50!).toBeLessThan(20);
    });
    await withServer(options, async (server) => {
      const s = await runLoad({ openai: server.url, count: 2 });
      expect(s.output_tokens).toBe(24);
      expect(s.itl_ms.p50!).toBeGreaterThanOrEqual(28);
    });
  });

  it('drives /v1/completions with a prompt, streamed or (--no-stream) as one JSON body', async () => {
    await withServer({ chunks: 3, chunkDelayMs: 2, firstChunkDelayMs: 20 }, async (server) => {
      const streamed = await runLoad({ openai: `${server.url}/v1/`, api: 'completions', count: 2, promptTokens: { min: 5, max: 5 }, model: 'fake-model' });
      expect(streamed).toMatchObject({ target: `${server.url}/v1/completions`, api: 'completions', completed: 2, output_tokens: 6 });
      expect(streamed.ttft_ms.p50!).toBeGreaterThanOrEqual(19);
      const plain = await runLoad({ openai: server.url, api: 'completions', count: 2, stream: false, promptTokens: { min: 5, max: 5 } });
      expect(plain).toMatchObject({ completed: 2, errors: {}, output_tokens: 6, itl_ms: { p50: null } });
      expect(plain.ttft_ms.p50!).toBeGreaterThanOrEqual(19);
      expect(server.requests.map((r) => r.path)).toEqual(Array(4).fill('/v1/completions'));
      expect(words(server.requests[0]!.body['prompt'])).toBe(5);
      expect(server.requests[3]!.body).toMatchObject({ stream: false });
      expect(server.requests[3]!.body).not.toHaveProperty('stream_options');
    });
  });

  it('issues arrivals at a fixed rate in an open loop and stops at the duration', async () => {
    await withServer({ chunks: 2, chunkDelayMs: 1 }, async (server) => {
      const s = await runLoad({ openai: server.url, rate: 50, arrival: 'fixed', durationS: 0.5 });
      expect(s.sent).toBeGreaterThanOrEqual(20);
      expect(s.sent).toBeLessThanOrEqual(27);
      expect(s.completed).toBe(s.sent);
      expect(s.duration_s).toBeLessThan(2);
    });
  });

  it('asks GET /v1/models once and fails clearly when the server lists none or is down', async () => {
    await withServer({ models: [] }, async (server) => {
      await expect(runLoad({ openai: server.url, count: 1 })).rejects.toThrow(LoadSetupError);
      await expect(runLoad({ openai: server.url, count: 1 })).rejects.toThrow(/\/v1\/models lists no models.*--model/);
      expect(server.requests).toHaveLength(0);
    });
    const gone = await startFakeOpenAi();
    await gone.close();
    await expect(runLoad({ openai: gone.url, count: 1 })).rejects.toThrow(/cannot list models at .*ECONNREFUSED/);
  });
});

describe('runLoad --openai: overload', () => {
  it('counts a chosen fraction of 529s as rejected and keeps sent = completed + rejected + errors', async () => {
    await withServer({ rejectFraction: 0.25, retryAfter: '1', chunkDelayMs: 1 }, async (server) => {
      const s = await runLoad({ openai: server.url, concurrency: 4, count: 20 });
      expect(s).toMatchObject({ sent: 20, completed: 15, rejected: 5, errors: {}, retries: 0, statuses: { '200': 15, '529': 5 } });
      expect(s.sent).toBe(s.completed + s.rejected + errorsTotal(s));
    });
  });

  it('retries after exactly the Retry-After seconds', async () => {
    await withServer({ rejectFirst: 1, retryAfter: '1' }, async (server) => {
      const s = await runLoad({ openai: server.url, count: 1, retry: 3 });
      expect(s).toMatchObject({ sent: 2, rejected: 1, completed: 1, retries: 1, statuses: { '200': 1, '529': 1 } });
      expect(gaps(server)[0]).toBeGreaterThanOrEqual(990);
      expect(gaps(server)[0]).toBeLessThan(1600);
    });
  });

  it('lets many requests back off at once without a listener-leak warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      // Every attempt refused, so that each of the 16 backs off once whatever the order the server
      // sees them in (with rejectFirst: 16, a retry that overtook a slow first attempt was refused).
      await withServer({ rejectFraction: 1, retryAfter: '1' }, async (server) => {
        const s = await runLoad({ openai: server.url, concurrency: 16, count: 16, retry: 1, retryMaxMs: 200 });
        expect({ sent: s.sent, rejected: s.rejected, retries: s.retries }).toEqual({ sent: 32, rejected: 32, retries: 16 });
      });
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  });

  it('retries at the time a Retry-After HTTP date names', async () => {
    await withServer({ rejectFirst: 1, retryAfter: () => new Date(Date.now() + 2000).toUTCString() }, async (server) => {
      const s = await runLoad({ openai: server.url, count: 1, retry: 1 });
      expect(s).toMatchObject({ sent: 2, completed: 1 });
      // The date has whole seconds: 1 to 2 s after the rejection.
      expect(gaps(server)[0]).toBeGreaterThanOrEqual(990);
      expect(gaps(server)[0]).toBeLessThan(2600);
    });
  });

  it('caps Retry-After at --retry-max-ms, and backs off with jitter without one', async () => {
    await withServer({ rejectFirst: 2, retryAfter: '30' }, async (server) => {
      const s = await runLoad({ openai: server.url, count: 1, retry: 2, retryMaxMs: 250 });
      expect(s).toMatchObject({ sent: 3, rejected: 2, completed: 1 });
      for (const gap of gaps(server)) {
        expect(gap).toBeGreaterThanOrEqual(245);
        expect(gap).toBeLessThan(700);
      }
    });
    await withServer({ rejectFirst: 1 }, async (server) => {
      expect(await runLoad({ openai: server.url, count: 1, retry: 1, retryBaseMs: 100 })).toMatchObject({ sent: 2, completed: 1 });
      expect(gaps(server)[0]).toBeGreaterThanOrEqual(45);
      expect(gaps(server)[0]).toBeLessThan(300);
    });
  });

  it('gives up after --retry attempts, and never retries without --retry', async () => {
    await withServer({ rejectFraction: 1, retryAfter: '0' }, async (server) => {
      expect(await runLoad({ openai: server.url, count: 2, retry: 2 })).toMatchObject({ sent: 6, rejected: 6, completed: 0, retries: 4 });
      expect(await runLoad({ openai: server.url, count: 2 })).toMatchObject({ sent: 2, rejected: 2, retries: 0 });
    });
  });

  it('takes another overload status (a frontend set to 503) only when told to', async () => {
    await withServer({ rejectFirst: 1, overloadStatus: 503, retryAfter: '0' }, async (server) => {
      expect(await runLoad({ openai: server.url, count: 1, retry: 2, overloadStatuses: [529, 503] })).toMatchObject({
        sent: 2,
        rejected: 1,
        completed: 1,
        errors: {},
        statuses: { '200': 1, '503': 1 },
      });
    });
    await withServer({ rejectFirst: 1, overloadStatus: 503, retryAfter: '0' }, async (server) => {
      expect(await runLoad({ openai: server.url, count: 1, retry: 2 })).toMatchObject({ sent: 1, rejected: 0, completed: 0, errors: { HTTP_503: 1 } });
    });
  });
});

describe('runLoad --openai: errors and stops', () => {
  it('labels other statuses, broken and unfinished streams, refused connections and timeouts', async () => {
    await withServer({}, async (server) => {
      expect(await runLoad({ openai: server.url, model: 'nope', count: 2 })).toMatchObject({ sent: 2, errors: { HTTP_404: 2 }, statuses: { '404': 2 } });
    });
    await withServer({ ending: 'reset', chunks: 3 }, async (server) => {
      expect(await runLoad({ openai: server.url, count: 2 })).toMatchObject({ sent: 2, completed: 0, errors: { STREAM_BROKEN: 2 }, statuses: { '200': 2 } });
    });
    await withServer({ ending: 'no-done' }, async (server) => {
      expect(await runLoad({ openai: server.url, count: 2 })).toMatchObject({ sent: 2, completed: 0, errors: { STREAM_INCOMPLETE: 2 } });
    });
    await withServer({ firstChunkDelayMs: 2000 }, async (server) => {
      const s = await runLoad({ openai: server.url, count: 2, concurrency: 2, deadlineMs: 50 });
      expect(s).toMatchObject({ sent: 2, errors: { DEADLINE_EXCEEDED: 2 } });
      expect(s.duration_s).toBeLessThan(1);
      await waitFor(() => server.aborted() === 2 && server.active() === 0, 'the server to see both requests aborted');
    });
    const gone = await startFakeOpenAi();
    await gone.close();
    expect(await runLoad({ openai: gone.url, model: 'fake-model', count: 2 })).toMatchObject({ sent: 2, errors: { NETWORK_ECONNREFUSED: 2 }, statuses: {} });
  });

  it('aborts in-flight fetches when the grace period ends, counted as CANCELLED', async () => {
    await withServer({ chunks: 10_000, chunkDelayMs: 20 }, async (server) => {
      const s = await runLoad({ openai: server.url, concurrency: 3, durationS: 0.2, graceS: 0.1 });
      expect(s).toMatchObject({ sent: 3, completed: 0, errors: { CANCELLED: 3 } });
      expect(s.output_tokens).toBeGreaterThan(0);
      expect(s.duration_s).toBeLessThan(1.5);
      await waitFor(() => server.aborted() === 3 && server.active() === 0, 'the server to see all three streams aborted');
    });
  });

  it('aborts in-flight fetches at once when the caller stops the run', async () => {
    await withServer({ chunks: 10_000, chunkDelayMs: 20 }, async (server) => {
      const stop = new AbortController();
      const run = runLoad({ openai: server.url, concurrency: 2, durationS: 30 }, { signal: stop.signal });
      await waitFor(() => server.active() === 2, 'two streams in progress');
      stop.abort();
      const s = await run;
      expect(s).toMatchObject({ sent: 2, errors: { CANCELLED: 2 } });
      expect(s.duration_s).toBeLessThan(5);
      await waitFor(() => server.aborted() === 2 && server.active() === 0, 'the server to see both streams aborted');
    });
  });
});
