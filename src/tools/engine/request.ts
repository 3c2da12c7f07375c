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

/** gRPC metadata naming the dp rank of a call whose data_parallel_rank is unset (vLLM's X-data-parallel-rank). */
export const DP_RANK_METADATA = 'x-data-parallel-rank';

export interface ParsedGenerate {
  readonly requestId: string;
  /** The dp rank asked for (field, else metadata), validated; undefined lets the engine pick. */
  readonly rank: number | undefined;
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

function rankOf(request: GenerateRequestMessage, metadataRank: string | undefined, size: number): number | undefined {
  const range = `[0, ${size}) (data parallel size ${size})`;
  const field = request.data_parallel_rank;
  if (field !== undefined && field !== null) {
    if (!Number.isInteger(field) || field < 0 || field >= size) {
      throw new InvalidRequestError(`data_parallel_rank ${field} is out of range ${range}`);
    }
    return field;
  }
  if (metadataRank === undefined) return undefined;
  const value = /^\s*\d{1,9}\s*$/.test(metadataRank) ? Number(metadataRank) : Number.NaN;
  if (!(value < size)) {
    throw new InvalidRequestError(`${DP_RANK_METADATA} ${JSON.stringify(metadataRank)} is not an integer in ${range}`);
  }
  return value;
}

/**
 * Throws {@link InvalidRequestError} with a message meant for the client. `metadataRank` is the
 * call's {@link DP_RANK_METADATA} value, read only when data_parallel_rank is unset.
 */
export function parseGenerateRequest(request: GenerateRequestMessage, options: EngineOptions, metadataRank?: string): ParsedGenerate {
  const rank = rankOf(request, metadataRank, options.dataParallelSize);
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
  return { requestId: request.request_id, rank, promptIds, maxTokens, stream: request.stream };
}
