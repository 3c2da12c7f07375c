// The PromptTokenizer contract, held by both implementations: the default one and a HuggingFace tokenizer.json.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createDefaultTokenizer } from '../../../../src/frontend/text/default-tokenizer.js';
import { loadHuggingFaceTokenizer } from '../../../../src/frontend/text/huggingface-tokenizer.js';
import type { PromptTokenizer } from '../../../../src/frontend/text/prompt-tokenizer.js';

const FIXTURE_DIR = fileURLToPath(new URL('../../../fixtures/tokenizer/', import.meta.url));

const implementations: [string, () => Promise<PromptTokenizer>][] = [
  ['default', () => Promise.resolve(createDefaultTokenizer())],
  ['huggingface', () => loadHuggingFaceTokenizer(FIXTURE_DIR)],
];

describe.each(implementations)('the %s tokenizer', (_, load) => {
  it('has a non-empty name for the startup line', async () => {
    expect((await load()).name).not.toBe('');
  });

  it('encodes deterministically to integer ids, and empty text to none', async () => {
    const tokenizer = await load();
    const ids = tokenizer.encode('hello world');
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.every((id) => Number.isInteger(id) && id >= 0)).toBe(true);
    expect(tokenizer.encode('hello world')).toEqual(ids);
    expect(tokenizer.encode('')).toEqual([]);
  });

  it('visits the ids encode gives, in order, and stops when the visitor says so', async () => {
    const tokenizer = await load();
    const all: number[] = [];
    tokenizer.eachToken('hello world hello', (id) => all.push(id) > 0);
    expect(all).toEqual(tokenizer.encode('hello world hello'));
    const first: number[] = [];
    tokenizer.eachToken('hello world hello', (id) => first.push(id) < 1);
    expect(first).toEqual(all.slice(0, 1));
  });

  it('gives independent decoders: one output does not change another', async () => {
    const tokenizer = await load();
    const ids = tokenizer.encode('hello world');
    const first = tokenizer.decoder();
    const second = tokenizer.decoder();
    const a = first.push(ids) + first.flush();
    first.push(ids);
    const b = second.push(ids) + second.flush();
    expect(b).toBe(a);
    expect(a).not.toBe('');
  });

  it('returns nothing for an empty push, and nothing from flush once everything was emitted', async () => {
    const decoder = (await load()).decoder();
    expect(decoder.push([])).toBe('');
    decoder.push((await load()).encode('hello'));
    expect(decoder.flush()).toBe('');
  });
});
