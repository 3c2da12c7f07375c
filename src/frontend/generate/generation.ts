/**
 * One worker's output for a request, once the attempt loop has seen its first message: output
 * token ids as they arrive, then how the output finished. It keeps the router's in-flight
 * count (outputTokens per chunk, end() exactly once however it ends) and the request's token
 * timings, and turns every failure into a FrontendError (or ClientGoneError when the client
 * left). close() is the one way out for callers: idempotent, it cancels a call still open.
 */
import type { GenerateResponseMessage } from '../../protocol/engine/engine-proto.js';
import type { Logger } from '../../platform/log.js';
import type { RequestRecord } from '../frontend-metrics.js';
import type { InFlight } from '../routing/contracts.js';
import { ClientGoneError, FrontendError } from './errors.js';
import type { WorkerStream } from './worker-stream.js';
import { workerFailure } from './worker-status.js';

export type FinishReason = 'stop' | 'length';

export type GenerationEvent = { readonly kind: 'tokens'; readonly ids: readonly number[] } | { readonly kind: 'done'; readonly finishReason: FinishReason };

export interface GenerationParts {
  readonly stream: WorkerStream;
  readonly inflight: InFlight;
  readonly record: RequestRecord;
  /** Fires when the client leaves. */
  readonly signal: AbortSignal;
  /** Called once by close(): removes the abort listener the attempt loop added. */
  readonly onClose: () => void;
  /** The worker's address, kept out of client messages (logged instead). */
  readonly address: string;
  readonly workerId: string;
  readonly promptTokens: number;
  readonly logger: Logger;
}

export class Generation {
  private streamed = 0;
  private pendingDone: FinishReason | undefined;
  private closed = false;

  constructor(private readonly parts: GenerationParts) {}

  get promptTokens(): number {
    return this.parts.promptTokens;
  }

  /** Output tokens received so far. */
  get completionTokens(): number {
    return this.streamed;
  }

  /** The next event; after 'done' the generation is closed. Throws FrontendError or ClientGoneError. */
  async next(): Promise<GenerationEvent> {
    if (this.pendingDone !== undefined) return this.done(this.pendingDone);
    if (this.closed) throw new FrontendError('internal', 'generation read after it was closed');
    for (;;) {
      const item = await this.parts.stream.next();
      if (this.parts.signal.aborted) throw this.fail(new ClientGoneError());
      if (item.kind === 'end') {
        const { workerId, address, logger } = this.parts;
        logger.warn('worker failed a request after output started', {
          worker_id: workerId,
          address,
          code: item.status.code,
          details: item.status.details,
          output_tokens: this.streamed,
        });
        throw this.fail(workerFailure(item.status, address));
      }
      const event = this.fromMessage(item.message);
      if (event !== undefined) return event;
    }
  }

  /** Ends the attempt: cancels the call if it is still open, ends the in-flight count. Idempotent. */
  close(): void {
    this.end('abandoned');
  }

  /** 'finished': the worker sent its last message, its call ends by itself; 'abandoned': cancel it. */
  private end(how: 'finished' | 'abandoned'): void {
    if (this.closed) return;
    this.closed = true;
    if (how === 'finished') this.parts.stream.finish();
    else this.parts.stream.cancel();
    this.parts.inflight.end();
    this.parts.onClose();
  }

  private fromMessage(message: GenerateResponseMessage): GenerationEvent | undefined {
    if (message.chunk) return this.tokens(message.chunk.token_ids ?? []);
    if (message.complete) {
      const reason = finishReason(message.complete.finish_reason);
      if (reason === undefined) throw this.fail(new FrontendError('worker_failed', 'the worker aborted the request'));
      // Streamed calls repeat ids here: vLLM the last chunk's (DELTA output), others every id; only ids beyond those streamed are new.
      const rest = (message.complete.output_ids ?? []).slice(this.streamed);
      if (rest.length === 0) return this.done(reason);
      this.pendingDone = reason;
      return this.tokens(rest);
    }
    return undefined;
  }

  private tokens(ids: readonly number[]): GenerationEvent | undefined {
    if (ids.length === 0) return undefined;
    this.streamed += ids.length;
    this.parts.inflight.outputTokens(ids.length);
    this.parts.record.tokens(ids.length);
    return { kind: 'tokens', ids };
  }

  private done(finishReason: FinishReason): GenerationEvent {
    this.pendingDone = undefined;
    this.end('finished');
    return { kind: 'done', finishReason };
  }

  private fail<E extends Error>(error: E): E {
    this.close();
    return error;
  }
}

/** vLLM's finish reasons; "abort" (and anything unknown but empty) means no normal finish. */
function finishReason(reason: string): FinishReason | undefined {
  if (reason === 'length') return 'length';
  if (reason === 'abort' || reason === '') return undefined;
  return 'stop';
}
