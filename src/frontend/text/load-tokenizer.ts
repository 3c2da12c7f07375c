/**
 * Which tokenizer the frontend runs, as plain data a tokenizer thread can be given
 * (tokenizer-thread.ts loads its own copy from it), and loading it.
 */
import { createDefaultTokenizer } from './default-tokenizer.js';
import { loadHuggingFaceTokenizer } from './huggingface-tokenizer.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';

export type TokenizerSpec = { readonly kind: 'default' } | { readonly kind: 'huggingface'; readonly path: string };

/** Throws TokenizerLoadError for a HuggingFace file that cannot be loaded. */
export async function loadTokenizer(spec: TokenizerSpec): Promise<PromptTokenizer> {
  return spec.kind === 'default' ? createDefaultTokenizer() : loadHuggingFaceTokenizer(spec.path);
}
