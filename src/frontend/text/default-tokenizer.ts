/**
 * The frontend's default tokenizer, for deployments with no tokenizer.json: the same rule as
 * the simulated engine (src/protocol/engine/simulated-tokenizer.ts), one token per whitespace-separated word, so
 * the prompt length the router counts is the one the engine sees. Ids are hashes and cannot
 * be turned back into the words they came from, so output ids are rendered as words from a
 * fixed list (id mod list length), each followed by a space: deterministic, readable, and the
 * same id always gives the same word.
 */
import { forEachToken, tokenize } from '../../protocol/engine/simulated-tokenizer.js';
import type { PromptTokenizer, TokenDecoder } from './prompt-tokenizer.js';

export const DEFAULT_VOCAB_SIZE = 32_000;

/** 64 short words; an output id renders as OUTPUT_WORDS[id % 64]. */
export const OUTPUT_WORDS: readonly string[] = Object.freeze([
  'the',
  'of',
  'and',
  'to',
  'in',
  'a',
  'is',
  'that',
  'for',
  'it',
  'as',
  'was',
  'with',
  'be',
  'by',
  'on',
  'not',
  'he',
  'this',
  'are',
  'or',
  'his',
  'from',
  'at',
  'which',
  'but',
  'have',
  'an',
  'had',
  'they',
  'you',
  'were',
  'their',
  'one',
  'all',
  'we',
  'can',
  'her',
  'has',
  'there',
  'been',
  'if',
  'more',
  'when',
  'will',
  'would',
  'who',
  'so',
  'no',
  'time',
  'up',
  'out',
  'some',
  'into',
  'then',
  'its',
  'only',
  'new',
  'other',
  'also',
  'two',
  'any',
  'may',
  'these',
]);

/** The word (with its trailing space) an output id renders as. */
export function outputWord(id: number): string {
  return `${OUTPUT_WORDS[Math.abs(Math.trunc(id)) % OUTPUT_WORDS.length]!} `;
}

export function createDefaultTokenizer(vocabSize = DEFAULT_VOCAB_SIZE): PromptTokenizer {
  return {
    name: `default (one token per whitespace word, vocab ${vocabSize})`,
    encode: (text) => tokenize(text, vocabSize),
    eachToken: (text, visit) => forEachToken(text, vocabSize, visit),
    decoder: (): TokenDecoder => ({
      push: (ids) => ids.map(outputWord).join(''),
      flush: () => '',
    }),
  };
}
