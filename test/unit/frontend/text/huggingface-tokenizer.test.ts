// Loading a tokenizer.json (and the optional tokenizer_config.json beside it), and the sliding-window decoder.
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadHuggingFaceTokenizer, TokenizerLoadError, windowDecoder } from '../../../../src/frontend/text/huggingface-tokenizer.js';

const FIXTURE = fileURLToPath(new URL('../../../fixtures/tokenizer/tokenizer.json', import.meta.url));
// Fixture ids: "hello" = 14, " world" = 19, the three bytes of "€" = 8, 9, 10.
const HELLO = 14;
const WORLD = 19;

/** A decode over letters (id n -> letter n, id 99 -> an incomplete character), recording the windows it was asked for. */
function letters(): { decode: (ids: number[]) => string; calls: number[][] } {
  const calls: number[][] = [];
  return {
    calls,
    decode: (ids) => {
      calls.push([...ids]);
      return ids.map((id) => (id === 99 ? '\uFFFD' : String.fromCharCode(97 + id))).join('');
    },
  };
}

describe('windowDecoder', () => {
  it('emits the new suffix of each push, and never decodes for an empty push', () => {
    const { decode, calls } = letters();
    const decoder = windowDecoder(decode);
    expect(decoder.push([])).toBe('');
    expect(calls).toEqual([]);
    expect(decoder.push([0, 1])).toBe('ab');
    expect(decoder.push([2])).toBe('c');
    expect(decoder.flush()).toBe('');
  });

  it('decodes only the window since the last boundary, not the whole output', () => {
    const { decode, calls } = letters();
    const decoder = windowDecoder(decode);
    for (let id = 0; id < 6; id++) decoder.push([id]);
    // The last push decodes its previous token (the prefix) and the window of that token plus the new one.
    expect(calls.slice(-2)).toEqual([[4], [4, 5]]);
  });

  it('holds text back while it ends in U+FFFD and releases it with the completing token', () => {
    const pieces = new Map<string, string>([
      ['0', 'a'],
      ['0,99', 'a\uFFFD'],
      ['0,99,98', 'a€'],
    ]);
    const decoder = windowDecoder((ids) => pieces.get(ids.join(',')) ?? ids.map(() => '?').join(''));
    expect(decoder.push([0])).toBe('a');
    expect(decoder.push([99])).toBe('');
    expect(decoder.push([98])).toBe('€');
  });

  it('flushes held-back text once, then nothing', () => {
    const { decode } = letters();
    const decoder = windowDecoder(decode);
    expect(decoder.push([0, 99])).toBe('');
    expect(decoder.flush()).toBe('a\uFFFD');
    expect(decoder.flush()).toBe('');
  });

  it('emits nothing while a push adds no text (a skipped special token), and the later text in full', () => {
    const decoder = windowDecoder((ids) =>
      ids
        .filter((id) => id !== 7)
        .map((id) => String.fromCharCode(97 + id))
        .join(''),
    );
    expect(decoder.push([0])).toBe('a');
    expect(decoder.push([7])).toBe('');
    expect(decoder.push([1])).toBe('b');
    expect(decoder.flush()).toBe('');
  });
});

describe('loadHuggingFaceTokenizer', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hf-tokenizer-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads a tokenizer.json with no tokenizer_config.json beside it', async () => {
    const only = join(dir, 'only');
    await mkdir(only);
    await copyFile(FIXTURE, join(only, 'tokenizer.json'));
    const tokenizer = await loadHuggingFaceTokenizer(only);
    expect(tokenizer.name).toBe(`huggingface ${join(only, 'tokenizer.json')}`);
    expect(tokenizer.encode('hello world')).toEqual([HELLO, WORLD]);
    const decoder = tokenizer.decoder();
    expect(decoder.push([HELLO, WORLD]) + decoder.flush()).toBe('hello world');
  });

  it('names tokenizer.json inside a directory that has none', async () => {
    const empty = join(dir, 'empty');
    await mkdir(empty);
    const error = await loadHuggingFaceTokenizer(empty).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TokenizerLoadError);
    expect(error).toMatchObject({ name: 'TokenizerLoadError', path: join(empty, 'tokenizer.json') });
    expect((error as Error).message).toBe(`cannot load tokenizer ${join(empty, 'tokenizer.json')}: no such file`);
  });

  it('reports a path that does not exist at all as that path', async () => {
    const missing = join(dir, 'no-such-dir');
    await expect(loadHuggingFaceTokenizer(missing)).rejects.toMatchObject({ path: missing, message: `cannot load tokenizer ${missing}: no such file` });
  });

  it('fails on a tokenizer_config.json that is present but unreadable or not JSON, naming that file', async () => {
    const badConfig = join(dir, 'bad-config');
    await mkdir(badConfig);
    await copyFile(FIXTURE, join(badConfig, 'tokenizer.json'));
    await writeFile(join(badConfig, 'tokenizer_config.json'), '{ nope');
    await expect(loadHuggingFaceTokenizer(badConfig)).rejects.toThrow(`cannot load tokenizer ${join(badConfig, 'tokenizer_config.json')}: invalid JSON`);

    const dirConfig = join(dir, 'dir-config');
    await mkdir(join(dirConfig, 'tokenizer_config.json'), { recursive: true });
    await copyFile(FIXTURE, join(dirConfig, 'tokenizer.json'));
    await expect(loadHuggingFaceTokenizer(dirConfig)).rejects.toThrow(`cannot load tokenizer ${join(dirConfig, 'tokenizer_config.json')}: is a directory`);
  });

  it.each([
    ['null', 'null'],
    ['an array', '[{"model": {}}]'],
    ['a string model', '{"model": "BPE"}'],
  ])('refuses JSON that is %s as not a tokenizer.json', async (label, json) => {
    const file = join(dir, `${label.replace(/ /g, '-')}.json`);
    await writeFile(file, json);
    await expect(loadHuggingFaceTokenizer(file)).rejects.toThrow(`cannot load tokenizer ${file}: not a tokenizer.json (no "model" object)`);
  });
});
