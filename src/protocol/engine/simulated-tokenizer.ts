/**
 * The simulated engine's tokenizer, for `text` prompts only (tokenized prompts are used as
 * given). Rule: the text is split on runs of whitespace; each non-empty word is one token
 * whose id is FNV-1a(word) mod (vocabSize - 1) + 1, so id 0 never appears and the same word
 * always maps to the same id. "hello  big world" is 3 tokens. Deliberately trivial: callers
 * that need an exact prompt length send `tokenized.input_ids` instead.
 */
import { fnv1a } from '../../platform/prng.js';

export function tokenize(text: string, vocabSize: number): number[] {
  const ids: number[] = [];
  for (const word of text.split(/\s+/u)) {
    if (word !== '') ids.push((fnv1a(word) % (vocabSize - 1)) + 1);
  }
  return ids;
}
