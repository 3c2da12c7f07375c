// Whether a prompt fits a worker's gRPC message: its bytes when it does, 413 when it cannot, 400 with no tokens, nothing for a client gone.
import { describe, expect, it } from 'vitest';
import { ClientGoneError, FrontendError } from '../../../../src/frontend/generate/errors.js';
import { OTHER_FIELDS_MAX_BYTES, PromptAdmission } from '../../../../src/frontend/generate/prompt-admission.js';
import { createDefaultTokenizer } from '../../../../src/frontend/text/default-tokenizer.js';
import { PromptEncoder } from '../../../../src/frontend/text/prompt-encoder.js';
import type { PromptEncoding } from '../../../../src/frontend/text/prompt-encoding.js';
import { EncodeAbortedError } from '../../../../src/frontend/text/tokenizer-pool.js';

const LIMIT = 64 * 1024;
const admission = (encoder = new PromptEncoder(createDefaultTokenizer())) => new PromptAdmission(encoder, LIMIT);
const live = new AbortController().signal;

async function failure(run: Promise<unknown>): Promise<FrontendError> {
  const error = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FrontendError);
  return error as FrontendError;
}

/** An encoder that answers `outcome` and records the budget it was given. */
function scripted(outcome: () => Promise<PromptEncoding>): PromptEncoder & { budgets: number[] } {
  const budgets: number[] = [];
  return Object.assign(Object.create(PromptEncoder.prototype) as PromptEncoder, {
    budgets,
    encode: (_text: string, maxBytes: number) => (budgets.push(maxBytes), outcome()),
  });
}

describe('PromptAdmission', () => {
  it("gives the prompt the message limit less the other fields' room, and its token count", async () => {
    const encoder = scripted(() => Promise.resolve({ kind: 'encoded', tokens: 3, tokenized: new Uint8Array([1]) }));
    expect(await admission(encoder).admit({ text: 'a b c' }, 'messages', live)).toEqual({ tokens: 3, tokenized: new Uint8Array([1]) });
    expect(encoder.budgets).toEqual([LIMIT - OTHER_FIELDS_MAX_BYTES]);
  });

  it('refuses with 413 a text or ids prompt whose field would not fit, naming the limit', async () => {
    for (const input of [{ text: 'a '.repeat(40_000) }, { ids: Array.from({ length: 40_000 }, () => 300) }, { ids: new Array<number>(LIMIT).fill(1) }]) {
      const error = await failure(admission().admit(input, 'prompt', live));
      expect(error.code).toBe('payload_too_large');
      expect(error.message).toContain(`would exceed ${LIMIT} bytes`);
    }
  });

  it('writes ids given as ids, each as it is', async () => {
    const admitted = await admission().admit({ ids: [0, 5, 70_000] }, 'prompt', live);
    expect(admitted.tokens).toBe(3);
    expect(admitted.tokenized.length).toBe(2 + 2 + 1 + 1 + 3);
  });

  it('refuses a prompt of no tokens with a 400 naming the field', async () => {
    const error = await failure(admission().admit({ text: '   ' }, 'messages', live));
    expect(error).toMatchObject({ code: 'bad_request', message: 'body/messages: the prompt has no tokens' });
  });

  it('turns a client gone while its prompt waited into ClientGoneError, and a failed thread into a 500', async () => {
    const gone = scripted(() => Promise.reject(new EncodeAbortedError('gone')));
    expect(await failure(admission(gone).admit({ text: 'x' }, 'prompt', live))).toBeInstanceOf(ClientGoneError);
    const broken = scripted(() => Promise.reject(new Error('the tokenizer thread died: exited with code 1')));
    expect(await failure(admission(broken).admit({ text: 'x' }, 'prompt', live))).toMatchObject({
      code: 'internal',
      message: 'the tokenizer thread died: exited with code 1',
    });
  });
});
