// The default tokenizer: whitespace words in (as the simulated engine counts them), fixed words out.
import { describe, expect, it } from 'vitest';
import { createDefaultTokenizer, DEFAULT_VOCAB_SIZE, OUTPUT_WORDS, outputWord } from '../../../../src/frontend/text/default-tokenizer.js';

describe('outputWord', () => {
  it('maps an id to the word at id mod 64, followed by one space', () => {
    expect(outputWord(0)).toBe('the ');
    expect(outputWord(63)).toBe('these ');
    expect(outputWord(64)).toBe('the ');
    expect(outputWord(64 * 1000 + 5)).toBe(`${OUTPUT_WORDS[5]} `);
  });

  it('never renders undefined for ids a worker should not send (negative, fractional)', () => {
    expect(outputWord(-1)).toBe(`${OUTPUT_WORDS[1]} `);
    expect(outputWord(2.9)).toBe(`${OUTPUT_WORDS[2]} `);
    expect(outputWord(-65.5)).toBe(`${OUTPUT_WORDS[1]} `);
  });
});

describe('OUTPUT_WORDS', () => {
  it('is 64 distinct, space-free words that cannot be changed', () => {
    expect(OUTPUT_WORDS).toHaveLength(64);
    expect(new Set(OUTPUT_WORDS).size).toBe(64);
    expect(OUTPUT_WORDS.every((w) => /^\S+$/u.test(w))).toBe(true);
    expect(Object.isFrozen(OUTPUT_WORDS)).toBe(true);
  });
});

describe('createDefaultTokenizer', () => {
  it('counts one token per whitespace-separated word, whatever the whitespace', () => {
    const tokenizer = createDefaultTokenizer();
    expect(tokenizer.encode('a\n\nb\t c  ')).toHaveLength(3);
    expect(tokenizer.encode(' \n\t ')).toEqual([]);
  });

  it('gives the same word the same id and keeps ids inside 1..vocab-1', () => {
    const tokenizer = createDefaultTokenizer(50);
    const ids = tokenizer.encode('x y x z w v u t s r q p o');
    expect(ids[0]).toBe(ids[2]);
    expect(ids.every((id) => id >= 1 && id < 50)).toBe(true);
  });

  it('names its vocabulary size, the default one when none is given', () => {
    expect(createDefaultTokenizer().name).toContain(`vocab ${DEFAULT_VOCAB_SIZE}`);
    expect(createDefaultTokenizer(123).name).toContain('vocab 123');
  });

  it('decodes every id at once, holding nothing back', () => {
    const decoder = createDefaultTokenizer().decoder();
    expect(decoder.push([3])).toBe(`${OUTPUT_WORDS[3]} `);
    expect(decoder.push([])).toBe('');
    expect(decoder.flush()).toBe('');
  });
});
