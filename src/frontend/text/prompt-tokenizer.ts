/**
 * What the frontend needs from a tokenizer: prompt text to token ids (the worker is sent ids,
 * so the router and the sidecar count the same prompt length), and output ids back to text,
 * incrementally, as tokens stream in. Two implementations: the default one, which mirrors the
 * simulated engine's whitespace rule and cannot be inverted, and a HuggingFace tokenizer.json.
 */

/** Turns a growing list of output token ids into text, one piece per push. */
export interface TokenDecoder {
  /**
   * Adds the next output ids and returns the text they complete. May return '' while a
   * character is still incomplete (a multi-byte character split over tokens is held back).
   */
  push(ids: readonly number[]): string;
  /** At the end of the output: whatever is still held back (incomplete bytes included). */
  flush(): string;
}

export interface PromptTokenizer {
  /** Shown in logs and startup lines, e.g. "default (whitespace words)". */
  readonly name: string;
  encode(text: string): number[];
  /**
   * Each token id of `text` in order, until `visit` returns false: a tokenizer that can stream
   * (the default one) stops there, so a prompt too large for its message costs no more than the
   * part that fits.
   */
  eachToken(text: string, visit: (id: number) => boolean): void;
  /** A fresh decoder for one output. */
  decoder(): TokenDecoder;
}
