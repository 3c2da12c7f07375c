// Tokenizer threads: the same bytes as on the event loop, the loop free while a large prompt is tokenized, FIFO with abort, clean start and close.
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { loadTokenizer } from '../../../../src/frontend/text/load-tokenizer.js';
import { encodePrompt } from '../../../../src/frontend/text/prompt-encoding.js';
import { EncodeAbortedError, TokenizerPool } from '../../../../src/frontend/text/tokenizer-pool.js';

const FIXTURE = fileURLToPath(new URL('../../../fixtures/tokenizer', import.meta.url));
const BIG = 64 * 1024 * 1024;
/** About 3.4 million words: a few hundred ms of tokenizing. */
const HUGE = 'a '.repeat(3_400_000);

let pool: TokenizerPool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe('TokenizerPool', () => {
  it.each([
    ['the default tokenizer', { kind: 'default' } as const],
    ['a HuggingFace tokenizer.json', { kind: 'huggingface', path: FIXTURE } as const],
  ])('encodes with %s exactly as the event loop would', async (_name, spec) => {
    pool = await TokenizerPool.start(spec, 2);
    expect(pool.size).toBe(2);
    const text = 'hello world hello';
    expect(await pool.encode(text, 1024)).toEqual(encodePrompt(await loadTokenizer(spec), text, 1024));
    expect(await pool.encode('a '.repeat(2000), 64)).toEqual({ kind: 'too_large', maxBytes: 64 });
  });

  it('leaves the event loop free while it tokenizes a huge prompt: a timer due meanwhile runs first', async () => {
    pool = await TokenizerPool.start({ kind: 'default' }, 1);
    const order: string[] = [];
    const huge = pool.encode(HUGE, BIG).then((r) => order.push(`huge ${r.kind}`));
    await new Promise<void>((resolve) => setTimeout(() => resolve(void order.push('timer')), 1));
    await huge;
    expect(order).toEqual(['timer', 'huge encoded']);
  });

  it('answers a small prompt on a second thread while the first tokenizes a huge one', async () => {
    pool = await TokenizerPool.start({ kind: 'default' }, 2);
    const order: string[] = [];
    const huge = pool.encode(HUGE, BIG).then(() => order.push('huge'));
    const small = pool.encode('hi there', 1024).then(() => order.push('small'));
    await Promise.all([huge, small]);
    expect(order).toEqual(['small', 'huge']);
  });

  it('drops a waiting prompt whose client left, and serves the next', async () => {
    pool = await TokenizerPool.start({ kind: 'default' }, 1);
    const running = pool.encode(HUGE, BIG);
    const leaving = new AbortController();
    const waiting = pool.encode('never tokenized', 1024, leaving.signal);
    const next = pool.encode('next one', 1024);
    expect(pool.queued).toBe(2);
    leaving.abort();
    await expect(waiting).rejects.toBeInstanceOf(EncodeAbortedError);
    expect(pool.queued).toBe(1);
    expect(await next).toMatchObject({ kind: 'encoded', tokens: 2 });
    await running;
    await expect(pool.encode('x', 16, AbortSignal.abort())).rejects.toBeInstanceOf(EncodeAbortedError);
  });

  it('fails to start, with the reason, when a thread cannot load its tokenizer', async () => {
    await expect(TokenizerPool.start({ kind: 'huggingface', path: `${FIXTURE}/missing.json` }, 2)).rejects.toThrow(
      /cannot load tokenizer .*missing\.json: no such file/u,
    );
  });

  it('on close, fails the prompts still waiting or running, and takes no more', async () => {
    const closing = await TokenizerPool.start({ kind: 'default' }, 1);
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (e: Error) => e.message,
      );
    const running = outcome(closing.encode(HUGE, BIG));
    const waiting = outcome(closing.encode('waits', 1024));
    await closing.close();
    expect(await running).toBe('the tokenizer pool closed');
    expect(await waiting).toBe('the tokenizer pool closed');
    await expect(closing.encode('late', 1024)).rejects.toThrow(/closed/u);
    expect(closing.size).toBe(0);
  });
});
