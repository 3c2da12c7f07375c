// Where a prompt is tokenized: small ones on the event loop, larger ones on a thread, all inline without threads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDefaultTokenizer } from '../../../../src/frontend/text/default-tokenizer.js';
import { PromptEncoder } from '../../../../src/frontend/text/prompt-encoder.js';
import type { PromptTokenizer } from '../../../../src/frontend/text/prompt-tokenizer.js';
import { TokenizerPool } from '../../../../src/frontend/text/tokenizer-pool.js';

let pool: TokenizerPool;
beforeAll(async () => {
  pool = await TokenizerPool.start({ kind: 'default' }, 1);
});
afterAll(() => pool.close());

/** The default tokenizer, counting the texts it tokenizes on this thread. */
function counting(): PromptTokenizer & { inline: number } {
  const base = createDefaultTokenizer();
  const tokenizer = { ...base, inline: 0, eachToken: (text: string, visit: (id: number) => boolean) => (tokenizer.inline++, base.eachToken(text, visit)) };
  return tokenizer;
}

describe('PromptEncoder', () => {
  it('tokenizes a prompt up to the inline length on the event loop, and a longer one on a thread', async () => {
    const tokenizer = counting();
    const encoder = new PromptEncoder(tokenizer, { pool, inlineMaxChars: 100 });
    expect(await encoder.encode('x '.repeat(50), 1024)).toMatchObject({ kind: 'encoded', tokens: 50 });
    expect(tokenizer.inline).toBe(1);
    expect(await encoder.encode('x '.repeat(51), 1024)).toMatchObject({ kind: 'encoded', tokens: 51 });
    expect(tokenizer.inline).toBe(1);
  });

  it('tokenizes everything on the event loop without threads', async () => {
    const tokenizer = counting();
    expect(await new PromptEncoder(tokenizer).encode('y '.repeat(50_000), 1 << 20)).toMatchObject({ kind: 'encoded', tokens: 50_000 });
    expect(tokenizer.inline).toBe(1);
  });
});
