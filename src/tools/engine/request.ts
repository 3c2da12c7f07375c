/**
 * Validation of a Generate request against the engine's limits, separate from the transport
 * so that every rule is unit-testable. The engine answers a failure with INVALID_ARGUMENT.
 */
import type { EngineOptions } from './options.js';
import { effectiveMaxModelLen } from './options.js';
import type { GenerateRequestMessage } from '../../protocol/engine/engine-proto.js';
import { tokenize } from '../../protocol/engine/simulated-tokenizer.js';

export class InvalidRequestError extends Error {
  override readonly name = 'InvalidRequestError';
  readonly code = 'ERR_INVALID_REQUEST';
}

export interface ParsedGenerate {
  readonly requestId: string;
  readonly promptIds: readonly number[];
  /** After clamping to --max-output-tokens and to the context left after the prompt. */
  readonly maxTokens: number;
  readonly stream: boolean;
}

function promptOf(request: GenerateRequestMessage, vocabSize: number): number[] {
  if (request.tokenized) return request.tokenized.input_ids ?? [];
  if (typeof request.text === 'string') return tokenize(request.text, vocabSize);
  return [];
}

/** Throws {@link InvalidRequestError} with a message meant for the client. */
export function parseGenerateRequest(request: GenerateRequestMessage, options: EngineOptions): ParsedGenerate {
  const promptIds = promptOf(request, options.vocabSize);
  if (promptIds.length === 0) {
    throw new InvalidRequestError('prompt is empty: set tokenized.input_ids or a non-blank text');
  }
  const params = request.sampling_params ?? {};
  if (params.n !== undefined && params.n > 1) {
    throw new InvalidRequestError(`sampling_params.n = ${params.n} is not supported: the simulated engine produces one sample`);
  }
  const requested = params.max_tokens ?? undefined;
  if (requested === 0) throw new InvalidRequestError('sampling_params.max_tokens must be at least 1, got 0');
  const maxModelLen = effectiveMaxModelLen(options);
  if (promptIds.length >= maxModelLen) {
    throw new InvalidRequestError(
      `prompt has ${promptIds.length} tokens but the maximum context length is ${maxModelLen} tokens, which leaves no room for output`,
    );
  }
  if (requested !== undefined && promptIds.length + requested > maxModelLen) {
    throw new InvalidRequestError(
      `this model's maximum context length is ${maxModelLen} tokens, but ${promptIds.length} prompt tokens + ${requested} max_tokens = ${promptIds.length + requested} were requested`,
    );
  }
  const maxTokens = Math.min(requested ?? Number.POSITIVE_INFINITY, options.maxOutputTokens, maxModelLen - promptIds.length);
  return { requestId: request.request_id, promptIds, maxTokens, stream: request.stream };
}
