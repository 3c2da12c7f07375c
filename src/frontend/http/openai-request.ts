/**
 * A validated OpenAI body (chat or completions) to the one job the generation code runs: the
 * prompt as given (text, or token ids), sampling parameters, stop strings, streaming flags. The
 * schema has already checked types; this adds the rules with their own messages (n must be 1,
 * one prompt per request, text parts only). Tokenizing is not done here: it may run on a
 * thread, and the prompt may be too large to send (generate/prompt-admission.ts).
 */
import type { GenerationRequest } from '../generate/attempt-loop.js';
import { FrontendError } from '../generate/errors.js';
import type { PromptInput } from '../generate/prompt-admission.js';
import type { Endpoint } from '../frontend-metrics.js';
import type { ClassFields } from './resolve-request-class.js';
import { renderChatPrompt, UnsupportedContentError, type ChatMessage } from '../text/chat-prompt.js';

/** What the worker is asked (all but the request id, given once the job starts, the prompt's bytes and the request's class), and how to answer. */
export interface CompletionJob extends Omit<GenerationRequest, 'requestId' | 'prompt' | 'priority' | 'tenant'> {
  readonly endpoint: Endpoint;
  readonly input: PromptInput;
  /** The body field the prompt came from, for messages about it. */
  readonly promptField: 'prompt' | 'messages';
  readonly stop: readonly string[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

/** `priority` and `user` are read with the headers (resolve-request-class.ts), not into the job. */
interface CommonBody extends ClassFields {
  model: string;
  max_tokens?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  temperature?: number | null;
  seed?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
}

export interface ChatBody extends CommonBody {
  messages: ChatMessage[];
  max_completion_tokens?: number | null;
}

export interface CompletionsBody extends CommonBody {
  prompt: string | string[] | number[];
}

export function chatJob(body: ChatBody): CompletionJob {
  let text: string;
  try {
    text = renderChatPrompt(body.messages);
  } catch (error) {
    if (error instanceof UnsupportedContentError) throw new FrontendError('bad_request', `body/${error.message}`, { cause: error });
    throw error;
  }
  return job('chat_completions', body, { text }, body.max_completion_tokens ?? body.max_tokens);
}

export function completionsJob(body: CompletionsBody): CompletionJob {
  const prompt = body.prompt;
  if (typeof prompt === 'string') return job('completions', body, { text: prompt }, body.max_tokens);
  if (prompt.every((p): p is number => typeof p === 'number')) return job('completions', body, { ids: prompt }, body.max_tokens);
  if (prompt.length !== 1) throw new FrontendError('bad_request', `body/prompt: only one prompt per request is supported, got ${prompt.length}`);
  return job('completions', body, { text: prompt[0] as string }, body.max_tokens);
}

function job(endpoint: Endpoint, body: CommonBody, input: PromptInput, maxTokens: number | null | undefined): CompletionJob {
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw new FrontendError('bad_request', `body/n must be 1 (one choice per request is supported), got ${body.n}`);
  }
  const stop = body.stop === undefined || body.stop === null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  return {
    endpoint,
    model: body.model,
    input,
    promptField: endpoint === 'completions' ? 'prompt' : 'messages',
    ...(maxTokens === undefined || maxTokens === null ? {} : { maxTokens }),
    ...(body.temperature === undefined || body.temperature === null ? {} : { temperature: body.temperature }),
    ...(body.seed === undefined || body.seed === null ? {} : { seed: body.seed }),
    stop: stop.filter((s) => s !== ''),
    stream: body.stream === true,
    includeUsage: body.stream === true && body.stream_options?.include_usage === true,
  };
}
