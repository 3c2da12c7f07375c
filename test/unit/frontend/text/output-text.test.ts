// Output ids to client text: the tokenizer's decoder, then the stop strings, per request.
import { describe, expect, it } from 'vitest';
import { OutputText } from '../../../../src/frontend/text/output-text.js';
import type { PromptTokenizer, TokenDecoder } from '../../../../src/frontend/text/prompt-tokenizer.js';

/** A tokenizer whose decoder renders id n as the letter n (0 = 'a'), and whose flush returns `tail`. */
function letterTokenizer(tail = ''): PromptTokenizer & { decoders: number } {
  const tokenizer = {
    name: 'letters',
    decoders: 0,
    encode: () => [],
    eachToken: () => {},
    decoder(): TokenDecoder {
      tokenizer.decoders++;
      let flushed = false;
      return {
        push: (ids) => ids.map((id) => String.fromCharCode(97 + id)).join(''),
        flush: () => (flushed ? '' : ((flushed = true), tail)),
      };
    },
  };
  return tokenizer;
}

describe('OutputText', () => {
  it('takes a fresh decoder from the tokenizer for each output', () => {
    const tokenizer = letterTokenizer();
    new OutputText(tokenizer, []);
    new OutputText(tokenizer, []);
    expect(tokenizer.decoders).toBe(2);
  });

  it('passes decoded text straight through without stop strings', () => {
    const output = new OutputText(letterTokenizer(), []);
    expect(output.push([0, 1, 2])).toEqual({ text: 'abc', stopped: false });
    expect(output.finish()).toEqual({ text: '', stopped: false });
  });

  it('applies stop strings to the decoded text, not to the ids', () => {
    const output = new OutputText(letterTokenizer(), ['cd']);
    expect(output.push([0, 1, 2])).toEqual({ text: 'ab', stopped: false });
    expect(output.push([3, 4])).toEqual({ text: '', stopped: true });
  });

  it("at the end, returns the decoder's held-back text followed by the stop matcher's held tail", () => {
    const output = new OutputText(letterTokenizer('!'), ['c!?']);
    expect(output.push([0, 2])).toEqual({ text: 'a', stopped: false });
    expect(output.finish()).toEqual({ text: 'c!', stopped: false });
  });

  it("stops at the end when the decoder's flushed text completes a stop string", () => {
    const output = new OutputText(letterTokenizer('END'), ['END']);
    expect(output.push([0])).toEqual({ text: 'a', stopped: false });
    expect(output.finish()).toEqual({ text: '', stopped: true });
  });
});
