/**
 * The output a call is expected to generate, for its KV reservation: min(its max_tokens, a high
 * quantile of the outputs of recent completed calls). Until enough calls have completed it is
 * min(its max_tokens, CONSERVATIVE_OUTPUT_TOKENS): conservative at first, corrected as calls end,
 * and never so large that one call's guess holds a whole cache. SGLang reserves the same growth (scaled by its new_token_ratio); vLLM
 * reserves none and pays in preemptions.
 *
 * Only completed calls teach it: a cancelled call's output is cut short, and learning from it
 * would reserve too little.
 */

/** Recent completed outputs remembered. */
export const OUTPUT_WINDOW = 256;
/** Completed calls before the quantile is trusted over max_tokens. */
export const MIN_OUTPUT_SAMPLES = 16;
/** The quantile reserved for. */
export const OUTPUT_QUANTILE = 0.9;
/** The reservation for output before any call has completed (at most): the safe side of common chats, short of a whole context. */
export const CONSERVATIVE_OUTPUT_TOKENS = 2048;

export class OutputLengths {
  private readonly ring = new Float64Array(OUTPUT_WINDOW);
  private count = 0;
  private cached: number | undefined;

  /** Completed calls seen since start. */
  get samples(): number {
    return this.count;
  }

  /** The learned quantile, once MIN_OUTPUT_SAMPLES calls completed; undefined before. */
  get quantile(): number | undefined {
    if (this.count < MIN_OUTPUT_SAMPLES) return undefined;
    if (this.cached === undefined) {
      const seen = Array.from(this.ring.subarray(0, Math.min(this.count, OUTPUT_WINDOW))).sort((x, y) => x - y);
      this.cached = seen[Math.min(seen.length - 1, Math.floor(OUTPUT_QUANTILE * seen.length))]!;
    }
    return this.cached;
  }

  /** A call completed with `tokens` output tokens. */
  completed(tokens: number): void {
    if (!(tokens >= 0 && Number.isFinite(tokens))) return;
    this.ring[this.count % OUTPUT_WINDOW] = tokens;
    this.count++;
    this.cached = undefined;
  }

  /** Output tokens to reserve for a call asking for at most `maxTokens` (undefined: it did not say). */
  expected(maxTokens: number | undefined): number {
    const cap = maxTokens !== undefined && maxTokens >= 0 ? maxTokens : Infinity;
    return Math.min(cap, this.quantile ?? CONSERVATIVE_OUTPUT_TOKENS);
  }
}
