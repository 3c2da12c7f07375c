/**
 * The OpenAI response objects, built in one place: chat.completion and text_completion for
 * whole answers, chat.completion.chunk and text_completion chunks for streams, and the usage
 * object. Field order and null fields follow what OpenAI itself returns, since clients and
 * SDK type definitions expect them (`logprobs: null`, `usage: null` in stream chunks when the
 * final usage chunk is asked for).
 */
import type { Endpoint } from '../frontend-metrics.js';
import type { FinishReason } from '../generate/generation.js';

export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** What every object of one response shares. */
export interface ResponseHead {
  readonly id: string;
  /** Unix seconds. */
  readonly created: number;
  readonly model: string;
}

export function idPrefix(endpoint: Endpoint): string {
  return endpoint === 'chat_completions' ? 'chatcmpl-' : 'cmpl-';
}

export function wholeResponse(endpoint: Endpoint, head: ResponseHead, text: string, finishReason: FinishReason, u: Usage): object {
  if (endpoint === 'chat_completions') {
    return {
      ...head,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finishReason }],
      usage: u,
    };
  }
  return {
    ...head,
    object: 'text_completion',
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason }],
    usage: u,
  };
}

/** Builds the chunks of one streamed response. */
export class ChunkShapes {
  constructor(
    private readonly endpoint: Endpoint,
    private readonly head: ResponseHead,
    /** With stream_options.include_usage every chunk carries `usage: null` and a last one the usage. */
    private readonly includeUsage: boolean,
  ) {}

  /** Chat's opening chunk (role, empty content); completions have none. */
  opening(): object | undefined {
    return this.endpoint === 'chat_completions' ? this.chunk({ role: 'assistant', content: '' }, null) : undefined;
  }

  text(piece: string): object {
    return this.endpoint === 'chat_completions' ? this.chunk({ content: piece }, null) : this.chunk(piece, null);
  }

  finish(reason: FinishReason): object {
    return this.endpoint === 'chat_completions' ? this.chunk({}, reason) : this.chunk('', reason);
  }

  /** The usage chunk (choices: []), or undefined when it was not asked for. */
  usage(u: Usage): object | undefined {
    return this.includeUsage ? { ...this.head, object: this.object(), choices: [], usage: u } : undefined;
  }

  private object(): string {
    return this.endpoint === 'chat_completions' ? 'chat.completion.chunk' : 'text_completion';
  }

  private chunk(content: object | string, finishReason: FinishReason | null): object {
    const choice =
      typeof content === 'string'
        ? { index: 0, text: content, logprobs: null, finish_reason: finishReason }
        : { index: 0, delta: content, logprobs: null, finish_reason: finishReason };
    return { ...this.head, object: this.object(), choices: [choice], ...(this.includeUsage ? { usage: null } : {}) };
  }
}
