/**
 * A validated OpenAI body (chat or completions) to the one job the generation code runs:
 * prompt text and ids, sampling parameters, stop strings, streaming flags. The schema has
 * already checked types; this adds the rules with their own messages (n must be 1, one prompt
 * per request, text parts only, a non-empty prompt).
 */
import type { GenerationRequest } from '../generate/attempt-loop.js';
import { FrontendError } from '../generate/errors.js';
import type { Endpoint } from '../frontend-metrics.js';
import { renderChatPrompt, UnsupportedContentError, type ChatMessage } from '../text/chat-prompt.js';
import type { PromptTokenizer } from '../text/prompt-tokenizer.js';

/** What the worker is asked (all but the request id, given once the job starts), and how to answer. */
export interface CompletionJob extends Omit<GenerationRequest, 'requestId'> {
  readonly endpoint: Endpoint;
  readonly stop: readonly string[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

interface CommonBody {
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

export function chatJob(body: ChatBody, tokenizer: PromptTokenizer): CompletionJob {
  let promptText: string;
  try {
    promptText = renderChatPrompt(body.messages);
  } catch (error) {
    if (error instanceof UnsupportedContentError) throw new FrontendError('bad_request', `body/${error.message}`, { cause: error });
    throw error;
  }
  return job('chat_completions', body, promptText, tokenizer.encode(promptText), body.max_completion_tokens ?? body.max_tokens);
}

export function completionsJob(body: CompletionsBody, tokenizer: PromptTokenizer): CompletionJob {
  const prompt = body.prompt;
  if (typeof prompt === 'string') return job('completions', body, prompt, tokenizer.encode(prompt), body.max_tokens);
  if (prompt.every((p): p is number => typeof p === 'number')) return job('completions', body, '', prompt, body.max_tokens);
  if (prompt.length !== 1) throw new FrontendError('bad_request', `body/prompt: only one prompt per request is supported, got ${prompt.length}`);
  const text = prompt[0] as string;
  return job('completions', body, text, tokenizer.encode(text), body.max_tokens);
}

function job(endpoint: Endpoint, body: CommonBody, promptText: string, promptIds: readonly number[], maxTokens: number | null | undefined): CompletionJob {
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw new FrontendError('bad_request', `body/n must be 1 (one choice per request is supported), got ${body.n}`);
  }
  if (promptIds.length === 0) throw new FrontendError('bad_request', `body/${endpoint === 'completions' ? 'prompt' : 'messages'}: the prompt has no tokens`);
  const stop = body.stop === undefined || body.stop === null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  return {
    endpoint,
    model: body.model,
    promptText,
    promptIds,
    ...(maxTokens === undefined || maxTokens === null ? {} : { maxTokens }),
    ...(body.temperature === undefined || body.temperature === null ? {} : { temperature: body.temperature }),
    ...(body.seed === undefined || body.seed === null ? {} : { seed: body.seed }),
    stop: stop.filter((s) => s !== ''),
    stream: body.stream === true,
    includeUsage: body.stream === true && body.stream_options?.include_usage === true,
  };
}
