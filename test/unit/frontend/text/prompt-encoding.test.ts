// A prompt's text to its Generate field within a byte budget: the ids the tokenizer gives, or too_large as soon as they stop fitting.
import { describe, expect, it } from 'vitest';
import { vllmEngineMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { createDefaultTokenizer } from '../../../../src/frontend/text/default-tokenizer.js';
import { encodePrompt } from '../../../../src/frontend/text/prompt-encoding.js';
import type { PromptTokenizer } from '../../../../src/frontend/text/prompt-tokenizer.js';

const ids = (bytes: Uint8Array): number[] =>
  vllmEngineMessage<{ tokenized: { input_ids: number[] } }>('GenerateRequest').deserialize(Buffer.from(bytes)).tokenized.input_ids;

describe('encodePrompt', () => {
  const tokenizer = createDefaultTokenizer();

  it("writes the tokenizer's ids and counts them", () => {
    const encoded = encodePrompt(tokenizer, 'the quick brown fox', 1024);
    expect(encoded).toMatchObject({ kind: 'encoded', tokens: 4 });
    expect(encoded.kind === 'encoded' && ids(encoded.tokenized)).toEqual(tokenizer.encode('the quick brown fox'));
  });

  it('stops tokenizing at the first id over the budget and says too_large', () => {
    let visited = 0;
    const counting: PromptTokenizer = { ...tokenizer, eachToken: (text, visit) => tokenizer.eachToken(text, (id) => (visited++, visit(id))) };
    // "a" is a 2-byte id: about 500 fit in 1 KiB, of a million words.
    expect(encodePrompt(counting, 'a '.repeat(1_000_000), 1024)).toEqual({ kind: 'too_large', maxBytes: 1024 });
    expect(visited).toBeLessThan(600);
  });

  it('gives zero tokens for a text of whitespace (the caller refuses it)', () => {
    expect(encodePrompt(tokenizer, ' \n ', 1024)).toMatchObject({ kind: 'encoded', tokens: 0 });
  });
});
