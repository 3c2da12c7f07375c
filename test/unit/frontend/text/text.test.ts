// The frontend's text layer: tokenizers (default and HuggingFace), incremental decoding, stop strings, chat template.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenize } from '../../../../src/protocol/engine/simulated-tokenizer.js';
import { renderChatPrompt, UnsupportedContentError } from '../../../../src/frontend/text/chat-prompt.js';
import { createDefaultTokenizer, OUTPUT_WORDS, outputWord } from '../../../../src/frontend/text/default-tokenizer.js';
import { loadHuggingFaceTokenizer, TokenizerLoadError, windowDecoder } from '../../../../src/frontend/text/huggingface-tokenizer.js';
import { OutputText } from '../../../../src/frontend/text/output-text.js';
import { StopMatcher } from '../../../../src/frontend/text/stop-strings.js';

const FIXTURE_DIR = fileURLToPath(new URL('../../../fixtures/tokenizer/', import.meta.url));
// Fixture vocabulary: hello=14, " world"=19, " "=4, the three bytes of "€" = 8, 9, 10, "!"=20, <|endoftext|>=21 (special).
const HELLO = 14;
const WORLD = 19;
const EURO = [8, 9, 10];

describe('the default tokenizer', () => {
  it('encodes a prompt to the same ids as the simulated engine, one per whitespace word', () => {
    const text = '  the quick\tbrown fox  ';
    expect(createDefaultTokenizer().encode(text)).toEqual(tokenize(text, 32_000));
    expect(createDefaultTokenizer().encode(text)).toHaveLength(4);
  });

  it('renders each output id as a word from the fixed list followed by a space, the same word for the same id', () => {
    const decoder = createDefaultTokenizer().decoder();
    expect(decoder.push([0, 1, 65])).toBe(`${OUTPUT_WORDS[0]} ${OUTPUT_WORDS[1]} ${OUTPUT_WORDS[1]} `);
    expect(decoder.push([31_999])).toBe(outputWord(31_999));
    expect(decoder.flush()).toBe('');
  });
});

describe('the HuggingFace tokenizer', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'frontend-tokenizer-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads tokenizer.json from a directory or a file path and encodes with its BPE merges', async () => {
    for (const path of [FIXTURE_DIR, join(FIXTURE_DIR, 'tokenizer.json')]) {
      const tokenizer = await loadHuggingFaceTokenizer(path);
      expect(tokenizer.encode('hello world')).toEqual([HELLO, WORLD]);
      expect(tokenizer.encode('€')).toEqual(EURO);
      expect(tokenizer.name).toContain('tokenizer.json');
    }
  });

  it('decodes output incrementally, holding back a character whose bytes span several tokens', async () => {
    const decoder = (await loadHuggingFaceTokenizer(FIXTURE_DIR)).decoder();
    expect(decoder.push([HELLO])).toBe('hello');
    expect(decoder.push([WORLD])).toBe(' world');
    expect(decoder.push([4, EURO[0]!])).toBe('');
    expect(decoder.push([EURO[1]!])).toBe('');
    expect(decoder.push([EURO[2]!])).toBe(' €');
    expect(decoder.push([21])).toBe(''); // special token: skipped
    expect(decoder.push([20])).toBe('!');
    expect(decoder.flush()).toBe('');
  });

  it('gives the same text incrementally as decoding the whole output at once', async () => {
    const tokenizer = await loadHuggingFaceTokenizer(FIXTURE_DIR);
    const ids = [HELLO, WORLD, 4, ...EURO, 20, WORLD, ...EURO, HELLO];
    const decoder = tokenizer.decoder();
    const pieces = ids.map((id) => decoder.push([id]));
    expect(pieces.join('') + decoder.flush()).toBe('hello world €! world€hello');
  });

  it('flushes an incomplete character at the end of the output rather than dropping it', async () => {
    const decoder = (await loadHuggingFaceTokenizer(FIXTURE_DIR)).decoder();
    expect(decoder.push([HELLO, EURO[0]!])).toBe('');
    expect(decoder.flush()).toBe('hello\uFFFD');
  });

  it('throws a TokenizerLoadError naming the path for a missing file, bad JSON, or a file that is not a tokenizer', async () => {
    const missing = join(dir, 'nope', 'tokenizer.json');
    await expect(loadHuggingFaceTokenizer(missing)).rejects.toThrow(new TokenizerLoadError(missing, 'no such file'));
    const bad = join(dir, 'bad.json');
    await writeFile(bad, '{"model": ');
    await expect(loadHuggingFaceTokenizer(bad)).rejects.toThrow(`cannot load tokenizer ${bad}: invalid JSON`);
    const other = join(dir, 'other.json');
    await writeFile(other, '{"hello": 1}');
    await expect(loadHuggingFaceTokenizer(other)).rejects.toThrow(`cannot load tokenizer ${other}: not a tokenizer.json`);
    const broken = join(dir, 'broken.json');
    await writeFile(broken, '{"model": {"type": "NoSuchModel"}}');
    await expect(loadHuggingFaceTokenizer(broken)).rejects.toThrow(`cannot load tokenizer ${broken}: invalid tokenizer`);
  });

  it("keeps the spaces between tokens with a decoder that strips the first token's leading space (like Metaspace)", () => {
    const decode = (ids: number[]) =>
      ids
        .map((id) => ` w${id}`)
        .join('')
        .replace(/^ /u, '');
    const decoder = windowDecoder(decode);
    expect([decoder.push([1]), decoder.push([2]), decoder.push([3])]).toEqual(['w1', ' w2', ' w3']);
  });
});

describe('stop strings', () => {
  it('cut the text before the first stop string found and end the output', () => {
    const stops = new StopMatcher(['END', 'x']);
    expect(stops.push('abc END x')).toEqual({ text: 'abc ', stopped: true });
    expect(stops.push('more')).toEqual({ text: '', stopped: true });
  });

  it('hold back a tail that may become a stop string, and release it once it cannot', () => {
    const stops = new StopMatcher(['</s>']);
    expect(stops.push('hello <')).toEqual({ text: 'hello ', stopped: false });
    expect(stops.push('/')).toEqual({ text: '', stopped: false });
    expect(stops.push('b>')).toEqual({ text: '</b>', stopped: false });
    expect(stops.push('end</')).toEqual({ text: 'end', stopped: false });
    expect(stops.flush()).toBe('</');
  });

  it('find a stop string split over several pieces', () => {
    const stops = new StopMatcher(['STOP']);
    expect([stops.push('aS'), stops.push('T'), stops.push('OPb')]).toEqual([
      { text: 'a', stopped: false },
      { text: '', stopped: false },
      { text: '', stopped: true },
    ]);
  });

  it('pass everything through when there are none (empty strings are ignored)', () => {
    const stops = new StopMatcher(['']);
    expect(stops.push('abc')).toEqual({ text: 'abc', stopped: false });
  });

  it('apply to decoded output words, including at the end of the output', () => {
    const output = new OutputText(createDefaultTokenizer(), [`${OUTPUT_WORDS[2]} ${OUTPUT_WORDS[3]}`]);
    expect(output.push([0, 1])).toEqual({ text: `${OUTPUT_WORDS[0]} ${OUTPUT_WORDS[1]} `, stopped: false });
    expect(output.push([2])).toEqual({ text: '', stopped: false });
    expect(output.push([3])).toEqual({ text: '', stopped: true });
    const unfinished = new OutputText(createDefaultTokenizer(), [`${OUTPUT_WORDS[2]} ${OUTPUT_WORDS[3]}`]);
    expect(unfinished.push([2])).toEqual({ text: '', stopped: false });
    expect(unfinished.finish()).toEqual({ text: `${OUTPUT_WORDS[2]} `, stopped: false });
  });
});

describe('the chat prompt template', () => {
  it('renders each message as "role: content" on its own line and ends with "assistant:"', () => {
    const prompt = renderChatPrompt([
      { role: 'system', content: 'be brief' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hi ' },
          { type: 'text', text: 'there' },
        ],
      },
      { role: 'assistant', content: null },
    ]);
    expect(prompt).toBe('system: be brief\nuser: hi there\nassistant: \nassistant:');
  });

  it('refuses content parts other than text, naming the part', () => {
    expect(() => renderChatPrompt([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url' }] }])).toThrow(
      new UnsupportedContentError("messages/0/content/1: only text content parts are supported, got type 'image_url'"),
    );
  });
});
