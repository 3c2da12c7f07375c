// A streamed answer over SSE: chunk order, [DONE], nothing written before the first text, and failures mid-stream.
import type { FastifyReply } from 'fastify';
import { describe, expect, it } from 'vitest';
import { ClientGoneError, FrontendError } from '../../../../src/frontend/generate/errors.js';
import type { Generation, GenerationEvent } from '../../../../src/frontend/generate/generation.js';
import { streamAnswer } from '../../../../src/frontend/http/answer-stream.js';
import { ChunkShapes } from '../../../../src/frontend/http/openai-shapes.js';
import { createDefaultTokenizer, outputWord } from '../../../../src/frontend/text/default-tokenizer.js';
import { OutputText } from '../../../../src/frontend/text/output-text.js';

const head = { id: 'chatcmpl-1', created: 1, model: 'm' };
const options = { overloadStatus: 529 };

/** A generation playing `script` (an Error entry is thrown by next()), counting tokens and closes. */
function scripted(script: (GenerationEvent | Error)[], promptTokens = 4): Generation & { closes: number } {
  let completionTokens = 0;
  const fake = {
    closes: 0,
    promptTokens,
    get completionTokens() {
      return completionTokens;
    },
    next: () => {
      const item = script.shift();
      if (item === undefined) return Promise.reject(new Error('read past the end'));
      if (item instanceof Error) return Promise.reject(item);
      if (item.kind === 'tokens') completionTokens += item.ids.length;
      return Promise.resolve(item);
    },
    close: () => void fake.closes++,
  };
  return fake as unknown as Generation & { closes: number };
}

/** reply.sse as the stream uses it: what was sent, and a switch for a send that never settles. */
function fakeReply(): { reply: FastifyReply; sent: unknown[]; sse: { isConnected: boolean; hang: boolean } } {
  const sent: unknown[] = [];
  const sse = {
    isConnected: true,
    hang: false,
    send: (message: unknown) => {
      if (sse.hang) return new Promise<void>(() => {});
      sent.push(message);
      return Promise.resolve();
    },
  };
  return { reply: { sse } as unknown as FastifyReply, sent, sse };
}

const data = (sent: unknown[]) => sent.map((m) => (typeof m === 'string' ? m : (m as { data: unknown }).data));

function answer(generation: Generation, shapes = new ChunkShapes('chat_completions', head, false), signal = new AbortController().signal) {
  return { generation, output: new OutputText(createDefaultTokenizer(), []), shapes, signal };
}

describe('streamAnswer', () => {
  it('sends the opening, each text piece, the finish and [DONE], in that order', async () => {
    const { reply, sent } = fakeReply();
    const generation = scripted([
      { kind: 'tokens', ids: [0] },
      { kind: 'tokens', ids: [1] },
      { kind: 'done', finishReason: 'length' },
    ]);
    await streamAnswer(reply, answer(generation), options);
    const shapes = new ChunkShapes('chat_completions', head, false);
    expect(data(sent)).toEqual([shapes.opening(), shapes.text(outputWord(0)), shapes.text(outputWord(1)), shapes.finish('length'), '[DONE]']);
    expect(generation.closes).toBe(1);
  });

  it('sends the usage chunk before [DONE] when asked for, counting prompt and received tokens', async () => {
    const { reply, sent } = fakeReply();
    const shapes = new ChunkShapes('completions', head, true);
    await streamAnswer(
      reply,
      answer(
        scripted(
          [
            { kind: 'tokens', ids: [0, 1, 2] },
            { kind: 'done', finishReason: 'stop' },
          ],
          5,
        ),
        shapes,
      ),
      options,
    );
    expect(data(sent).slice(-2)).toEqual([
      { ...head, object: 'text_completion', choices: [], usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 } },
      '[DONE]',
    ]);
  });

  it('still opens and finishes an answer with no text at all', async () => {
    const { reply, sent } = fakeReply();
    await streamAnswer(reply, answer(scripted([{ kind: 'done', finishReason: 'stop' }])), options);
    const shapes = new ChunkShapes('chat_completions', head, false);
    expect(data(sent)).toEqual([shapes.opening(), shapes.finish('stop'), '[DONE]']);
  });

  it('writes nothing and rethrows when the generation fails before any text, so the client gets a real status', async () => {
    const { reply, sent } = fakeReply();
    const failure = new FrontendError('worker_failed', 'boom');
    await expect(streamAnswer(reply, answer(scripted([failure])), options)).rejects.toBe(failure);
    expect(sent).toEqual([]);
  });

  it('after text went out, ends with one error event in the OpenAI shape and no [DONE]', async () => {
    const { reply, sent } = fakeReply();
    const generation = scripted([{ kind: 'tokens', ids: [0] }, new FrontendError('worker_timeout', 'deadline passed')]);
    await streamAnswer(reply, answer(generation), options);
    expect(data(sent).at(-1)).toEqual({ error: { message: 'deadline passed', type: 'Gateway Timeout', code: 504 } });
    expect(data(sent)).not.toContain('[DONE]');
    expect(generation.closes).toBe(1);
  });

  it('hides an unexpected error behind the internal error text', async () => {
    const { reply, sent } = fakeReply();
    await streamAnswer(reply, answer(scripted([{ kind: 'tokens', ids: [0] }, new Error('secret detail')])), options);
    expect(data(sent).at(-1)).toEqual({ error: { message: 'Internal server error', type: 'Internal Server Error', code: 500 } });
  });

  it('throws ClientGoneError, sending nothing more, once the client is no longer connected', async () => {
    const { reply, sent, sse } = fakeReply();
    sse.isConnected = false;
    const generation = scripted([
      { kind: 'tokens', ids: [0] },
      { kind: 'done', finishReason: 'stop' },
    ]);
    await expect(streamAnswer(reply, answer(generation), options)).rejects.toBeInstanceOf(ClientGoneError);
    expect(sent).toEqual([]);
    expect(generation.closes).toBe(1);
  });

  it('gives up a write the client will never drain as soon as the client leaves', async () => {
    const { reply, sse } = fakeReply();
    sse.hang = true;
    const abort = new AbortController();
    const done = streamAnswer(reply, answer(scripted([{ kind: 'tokens', ids: [0] }]), undefined, abort.signal), options);
    abort.abort();
    await expect(done).rejects.toBeInstanceOf(ClientGoneError);
  });

  it('stops at its first write when the client already left', async () => {
    const { reply, sent } = fakeReply();
    const abort = new AbortController();
    abort.abort();
    await expect(streamAnswer(reply, answer(scripted([{ kind: 'done', finishReason: 'stop' }]), undefined, abort.signal), options)).rejects.toBeInstanceOf(
      ClientGoneError,
    );
    // The opening was handed to the socket, but neither the finish nor [DONE] followed it.
    expect(data(sent)).toEqual([new ChunkShapes('chat_completions', head, false).opening()]);
  });
});
