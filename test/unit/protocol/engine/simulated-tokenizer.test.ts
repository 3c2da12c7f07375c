/**
 * The simulated engine's text tokenizer (also the frontend's default): one token per
 * whitespace-separated word, id FNV-1a(word) mod (vocabSize - 1) + 1, so ids stay in
 * 1 .. vocabSize - 1 and the same word always gets the same id.
 */
import { describe, expect, it } from 'vitest';
import { fnv1a } from '../../../../src/platform/prng.js';
import { tokenize } from '../../../../src/protocol/engine/simulated-tokenizer.js';

describe('tokenize', () => {
  it('gives one token per word, whatever the run of whitespace between words', () => {
    expect(tokenize('hello  big world', 32_000)).toHaveLength(3);
    expect(tokenize('a\tb\nc\r\nd', 32_000)).toHaveLength(4);
    // Unicode whitespace separates too: no-break space, ideographic space, line separator.
    expect(tokenize('a\u00a0b\u3000c\u2028d', 32_000)).toHaveLength(4);
  });

  it('gives no token for empty or whitespace-only text, and none for leading or trailing whitespace', () => {
    expect(tokenize('', 32_000)).toEqual([]);
    expect(tokenize(' \t\n ', 32_000)).toEqual([]);
    expect(tokenize('  hello world  \n', 32_000)).toEqual(tokenize('hello world', 32_000));
  });

  it('computes each id as FNV-1a(word) mod (vocabSize - 1) + 1', () => {
    const words = ['The', 'quick', 'brown', 'fox,', 'naïve', '日本語'];
    for (const vocab of [2, 3, 1000, 32_000, 2 ** 32 - 1]) {
      expect(tokenize(words.join(' '), vocab)).toEqual(words.map((w) => (fnv1a(w) % (vocab - 1)) + 1));
    }
  });

  it('keeps every id in 1 .. vocabSize - 1 (0 never appears)', () => {
    const text = Array.from({ length: 2000 }, (_, i) => `w${i}`).join(' ');
    for (const vocab of [2, 3, 17]) {
      const ids = tokenize(text, vocab);
      expect(Math.min(...ids)).toBe(1);
      expect(Math.max(...ids)).toBe(vocab - 1);
    }
  });

  it('maps the same word to the same id wherever it appears; punctuation and case make another word', () => {
    const [a, b, c, d, e] = tokenize('world hello world World world,', 32_000);
    expect(c).toBe(a);
    expect(b).not.toBe(a);
    expect(d).not.toBe(a);
    expect(e).not.toBe(a);
  });
});
