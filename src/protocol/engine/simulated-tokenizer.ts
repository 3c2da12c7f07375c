/**
 * The simulated engine's tokenizer, for `text` prompts only (tokenized prompts are used as
 * given). Rule: the text is split on runs of whitespace (what JavaScript's `\s` matches); each
 * non-empty word is one token whose id is FNV-1a(UTF-8 bytes of the word) mod (vocabSize - 1)
 * + 1, so id 0 never appears and the same word always maps to the same id. "hello  big world"
 * is 3 tokens. Deliberately trivial: callers that need an exact prompt length send
 * `tokenized.input_ids` instead.
 *
 * One pass over the UTF-16 code units, hashing each word's UTF-8 bytes as they are computed: no
 * regex split, no string or Buffer per word (which made a 7 MB prompt cost 1.5 s and hundreds
 * of MB), and the caller may stop early (a prompt already too large for its message).
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** The code units JavaScript's `\s` matches (the same with or without the `u` flag). */
function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  );
}

/** Calls `visit` with each token id of `text` in order, until it returns false. */
export function forEachToken(text: string, vocabSize: number, visit: (id: number) => boolean): void {
  const modulus = vocabSize - 1;
  let h = FNV_OFFSET;
  let inWord = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (isSpace(c)) {
      if (inWord) {
        if (!visit(((h >>> 0) % modulus) + 1)) return;
        inWord = false;
        h = FNV_OFFSET;
      }
      continue;
    }
    inWord = true;
    if (c < 0x80) {
      h = Math.imul(h ^ c, FNV_PRIME);
    } else if (c < 0x800) {
      h = Math.imul(h ^ (0xc0 | (c >> 6)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | (c & 0x3f)), FNV_PRIME);
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      const cp = 0x10000 + ((c - 0xd800) << 10) + (text.charCodeAt(++i) - 0xdc00);
      h = Math.imul(h ^ (0xf0 | (cp >> 18)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 12) & 0x3f)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | ((cp >> 6) & 0x3f)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | (cp & 0x3f)), FNV_PRIME);
    } else {
      // A lone surrogate is written as U+FFFD, as Buffer.from(text, 'utf8') does.
      const unit = c >= 0xd800 && c <= 0xdfff ? 0xfffd : c;
      h = Math.imul(h ^ (0xe0 | (unit >> 12)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | ((unit >> 6) & 0x3f)), FNV_PRIME);
      h = Math.imul(h ^ (0x80 | (unit & 0x3f)), FNV_PRIME);
    }
  }
  if (inWord) visit(((h >>> 0) % modulus) + 1);
}

export function tokenize(text: string, vocabSize: number): number[] {
  const ids: number[] = [];
  forEachToken(text, vocabSize, (id) => ids.push(id) > 0);
  return ids;
}
