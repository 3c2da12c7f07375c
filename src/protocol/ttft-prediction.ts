/**
 * The time to first token a call would see at a worker, predicted from what the worker knows of
 * itself: the prefill tokens ahead of the call, the call's own prompt, the worker's learned
 * prefill model, and the call's wait for KV room. One pure function for both halves: the sidecar
 * admits by it and publishes its inputs in load events (ttft_base_ms, prefill_tokens_per_s,
 * prefill_tokens_ahead, kv_free_blocks, kv_block_size), and the frontend predicts with the same
 * function for a prompt of the length it is about to route.
 *
 * The model is Dynamo's planner's (a linear fit of time on prefill tokens) and Mooncake's (queued
 * prefill plus own prefill): ttft = base + (tokens ahead + own tokens) / rate, taken at a high
 * quantile by the learner (prefill-model.ts), plus the wait for KV room when the call's blocks do
 * not fit yet.
 */

/** A worker's prefill cost, as learned from its first tokens. */
export interface PrefillModel {
  /** The part of a first token that does not grow with the prompt (a step, the network), ms, at the learner's quantile. */
  readonly baseMs: number;
  /** Prefill tokens per second. */
  readonly tokensPerS: number;
}

export interface TtftQuestion {
  /** Prefill tokens admitted (and queued) ahead of the call that have not had their first token. */
  readonly prefillTokensAhead: number;
  /** The call's own prompt. */
  readonly promptTokens: number;
  /** Its wait for KV room before its prefill can start; 0 when its blocks fit now. */
  readonly kvWaitMs?: number;
}

/** ms. */
export function predictTtftMs(model: PrefillModel, question: TtftQuestion): number {
  return model.baseMs + ((question.prefillTokensAhead + question.promptTokens) * 1000) / model.tokensPerS + (question.kvWaitMs ?? 0);
}

/** The time the call's own prompt takes to prefill, base included (what it needs after any wait), ms. */
export function ownPrefillMs(model: PrefillModel, promptTokens: number): number {
  return predictTtftMs(model, { prefillTokensAhead: 0, promptTokens });
}

/** Blocks a call holds for `tokens` tokens of prompt and output. */
export function blocksFor(tokens: number, blockSize: number): number {
  return Math.ceil(tokens / blockSize);
}

/** A load event's published model, or undefined when the worker has not learned one (either field missing or absurd). */
export function prefillModelOf(baseMs: number | null | undefined, tokensPerS: number | null | undefined): PrefillModel | undefined {
  if (typeof baseMs !== 'number' || typeof tokensPerS !== 'number') return undefined;
  if (!(baseMs >= 0 && baseMs <= MAX_PUBLISHED_MS) || !(tokensPerS > 0 && tokensPerS <= MAX_TOKENS_PER_S)) return undefined;
  return { baseMs, tokensPerS };
}

/** Bounds past which a published figure is a lie, not a measurement (a day; a billion tokens/s). */
export const MAX_PUBLISHED_MS = 86_400_000;
export const MAX_TOKENS_PER_S = 1e9;
