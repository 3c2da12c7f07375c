/**
 * Where a prompt is tokenized: on the event loop when it is small enough that a thread's round
 * trip (about 50 us: the text is copied to the thread, the bytes transferred back) would cost
 * more than it saves, on a tokenizer thread (tokenizer-pool.ts) otherwise, so that no prompt
 * blocks the loop for more than a fraction of a millisecond. Measured on the 2-vCPU machine of
 * docs/performance.md: the default tokenizer takes 0.1 ms inline for 4 KiB (the thread 0.2 ms)
 * and 0.5 ms for 16 KiB (0.25 ms); the test fixture's HuggingFace BPE 1.2 ms for 1,000
 * characters (1.5 ms) and 5.5 ms for 4 KiB (2.9 ms). Without threads (--tokenizer-threads 0, or
 * every thread lost) everything is tokenized inline.
 */
import type { TokenizerSpec } from './load-tokenizer.js';
import { encodePrompt, type PromptEncoding } from './prompt-encoding.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';
import type { TokenizerPool } from './tokenizer-pool.js';

/** Longest prompt (UTF-16 code units) tokenized on the event loop, per kind of tokenizer. */
export const INLINE_MAX_CHARS: Readonly<Record<TokenizerSpec['kind'], number>> = Object.freeze({ default: 8192, huggingface: 1024 });

export class PromptEncoder {
  /** `threads`: the pool and the longest prompt kept on the event loop (INLINE_MAX_CHARS of its tokenizer); none: always inline. */
  constructor(
    private readonly tokenizer: PromptTokenizer,
    private readonly threads?: { readonly pool: TokenizerPool; readonly inlineMaxChars: number },
  ) {}

  /** The prompt's field within `maxBytes`, or too_large. Rejects with EncodeAbortedError when `signal` fires while it waits for a thread. */
  async encode(text: string, maxBytes: number, signal?: AbortSignal): Promise<PromptEncoding> {
    const threads = this.threads;
    if (threads === undefined || threads.pool.size === 0 || text.length <= threads.inlineMaxChars) return encodePrompt(this.tokenizer, text, maxBytes);
    return threads.pool.encode(text, maxBytes, signal);
  }
}
