// The simulated tokenizer: one token per whitespace word, id FNV-1a(UTF-8 bytes) mod (vocab - 1) + 1, in one pass.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { forEachToken, tokenize } from '../../../../src/protocol/engine/simulated-tokenizer.js';

/** FNV-1a over the UTF-8 bytes Buffer gives (a lone surrogate as U+FFFD). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) h = Math.imul(h ^ byte, 0x01000193);
  return h >>> 0;
}

/** The rule written the obvious way (a regex split and a Buffer per word): what the one-pass scanner must equal. */
const byTheRule = (text: string, vocab: number): number[] =>
  text
    .split(/\s+/u)
    .filter((w) => w !== '')
    .map((w) => (fnv1a(w) % (vocab - 1)) + 1);

const SPACES = [' ', '\t', '\n', '\v', '\f', '\r', '\u00a0', '\u1680', '\u2000', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff'];
const NOT_SPACES = ['a', 'Z', '0', '-', '\u0085', '\u200b', 'é', '€', '中', '😀', '\ud800', '\udfff', '\u0000', '\u007f', '\u07ff', '\u0800', '\uffff'];

describe('tokenize', () => {
  it('gives one id per whitespace-separated word, the same for the same word, never 0', () => {
    const ids = tokenize('hello  big\tworld hello', 32_000);
    expect(ids).toHaveLength(4);
    expect(ids[0]).toBe(ids[3]);
    expect(ids.every((id) => id >= 1 && id < 32_000)).toBe(true);
    expect(tokenize(' \n\t ', 32_000)).toEqual([]);
  });

  it('equals the regex-split rule on every kind of whitespace, multi-byte character and lone surrogate', () => {
    const random = mulberry32(7);
    const pieces = [...SPACES, ...NOT_SPACES];
    for (let round = 0; round < 300; round++) {
      let text = '';
      const length = Math.floor(random() * 40);
      for (let i = 0; i < length; i++) text += pieces[Math.floor(random() * pieces.length)]!;
      expect(tokenize(text, 1000), JSON.stringify(text)).toEqual(byTheRule(text, 1000));
    }
  });

  it('stops as soon as the visitor says so', () => {
    const seen: number[] = [];
    forEachToken('a b c d', 32_000, (id) => seen.push(id) < 2);
    expect(seen).toEqual(tokenize('a b', 32_000));
  });
});
