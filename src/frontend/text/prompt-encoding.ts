/**
 * A prompt's text to the bytes the worker is sent: its token ids written straight into the
 * Generate request's `tokenized` field (src/protocol/engine/tokenized-input.ts) within a byte
 * budget, which is what a worker's gRPC message limit leaves for the prompt. Tokenizing stops
 * as soon as the ids no longer fit, so a prompt too large for any worker costs at most the
 * budget in memory, never its own size in ids. Runs wherever it is called: on the event loop
 * for small prompts, on a tokenizer thread (tokenizer-thread.ts) for the rest.
 */
import { TokenizedInputWriter } from '../../protocol/engine/tokenized-input.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';

/** A prompt ready to send: how many tokens it has (routing counts them) and the field's bytes. */
export interface EncodedPrompt {
  readonly tokens: number;
  readonly tokenized: Uint8Array;
}

export type PromptEncoding = ({ readonly kind: 'encoded' } & EncodedPrompt) | { readonly kind: 'too_large'; readonly maxBytes: number };

export function encodePrompt(tokenizer: PromptTokenizer, text: string, maxBytes: number): PromptEncoding {
  // The default tokenizer writes at most 1.5 bytes per character (a 3-byte id per 2-character
  // word), so this first buffer rarely grows; it never exceeds the budget.
  const writer = new TokenizedInputWriter(maxBytes, 2 * text.length + 16);
  tokenizer.eachToken(text, (id) => writer.push(id));
  if (writer.overflowed) return { kind: 'too_large', maxBytes };
  return { kind: 'encoded', tokens: writer.tokens, tokenized: writer.finish() };
}
