/**
 * A streamed OpenAI answer over SSE: `data: {chunk}` events as text arrives, a finish chunk,
 * the usage chunk when asked for, then `data: [DONE]`. Nothing is written (no status line)
 * before the first text or the finish: a failure up to then still reaches the client as a
 * real HTTP status. After that a failure becomes one `data: {"error":{...}}` event and the
 * stream ends (no [DONE]); the request is never retried once a byte went out.
 */
import type {} from '@fastify/sse';
import type { FastifyReply } from 'fastify';
import { ClientGoneError } from '../generate/errors.js';
import type { Generation } from '../generate/generation.js';
import { readOutput } from '../generate/read-output.js';
import type { OutputText } from '../text/output-text.js';
import { errorAnswer, toFrontendError, type ErrorAnswerOptions } from './error-table.js';
import { usage, type ChunkShapes } from './openai-shapes.js';

export interface StreamAnswer {
  readonly generation: Generation;
  readonly output: OutputText;
  readonly shapes: ChunkShapes;
  /** Fires when the client leaves. */
  readonly signal: AbortSignal;
}

/** Resolves when the stream is complete; throws (nothing written yet) or ClientGoneError. */
export async function streamAnswer(reply: FastifyReply, answer: StreamAnswer, options: ErrorAnswerOptions): Promise<void> {
  const { generation, output, shapes, signal } = answer;
  let started = false;
  const send = async (data: object | string): Promise<void> => {
    if (!reply.sse.isConnected) throw new ClientGoneError();
    try {
      await unlessGone(reply.sse.send(typeof data === 'string' ? data : { data }), signal);
    } catch {
      throw new ClientGoneError();
    }
  };
  const start = async (): Promise<void> => {
    if (started) return;
    started = true;
    const opening = shapes.opening();
    if (opening !== undefined) await send(opening);
  };
  try {
    const summary = await readOutput(generation, output, async (text) => {
      await start();
      await send(shapes.text(text));
    });
    await start();
    await send(shapes.finish(summary.finishReason));
    const usageChunk = shapes.usage(usage(generation.promptTokens, summary.completionTokens));
    if (usageChunk !== undefined) await send(usageChunk);
    await send('[DONE]');
  } catch (error) {
    if (!started || error instanceof ClientGoneError) throw error;
    const { body } = errorAnswer(toFrontendError(error), options);
    // Inside a stream the OpenAI shape: the error alone, under `error`.
    await send({ error: body.error }).catch(() => {});
  }
}

/**
 * `write`, or a rejection as soon as the client leaves: a write waiting for 'drain' (a client
 * that stopped reading) never settles once its socket is gone, which would keep the worker's
 * in-flight count and this handler for ever.
 */
function unlessGone(write: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(new ClientGoneError());
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(new ClientGoneError());
    signal.addEventListener('abort', onAbort, { once: true });
    write.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
