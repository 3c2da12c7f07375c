// A validated OpenAI body to the one job generation runs: prompt, sampling, stop strings, streaming flags.
import { describe, expect, it } from 'vitest';
import { FrontendError } from '../../../../src/frontend/generate/errors.js';
import { chatJob, completionsJob } from '../../../../src/frontend/http/openai-request.js';
import type { PromptTokenizer } from '../../../../src/frontend/text/prompt-tokenizer.js';

/** One id per character, so a prompt's ids say which text was encoded. */
const chars: PromptTokenizer = {
  name: 'chars',
  encode: (text) => [...text].map((c) => c.codePointAt(0)!),
  decoder: () => ({ push: () => '', flush: () => '' }),
};

function badRequest(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(FrontendError);
    expect((error as FrontendError).code).toBe('bad_request');
    return (error as Error).message;
  }
  throw new Error('expected a bad_request FrontendError');
}

describe('chatJob', () => {
  it('renders the messages with the chat template and encodes that text', () => {
    const job = chatJob({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }, chars);
    expect(job).toEqual({
      endpoint: 'chat_completions',
      model: 'm',
      promptText: 'user: hi\nassistant:',
      promptIds: chars.encode('user: hi\nassistant:'),
      stop: [],
      stream: false,
      includeUsage: false,
    });
  });

  it('prefers max_completion_tokens over the deprecated max_tokens, and falls back to it when null', () => {
    const messages = [{ role: 'user', content: 'x' }];
    expect(chatJob({ model: 'm', messages, max_tokens: 5, max_completion_tokens: 7 }, chars).maxTokens).toBe(7);
    expect(chatJob({ model: 'm', messages, max_tokens: 5, max_completion_tokens: null }, chars).maxTokens).toBe(5);
    expect(chatJob({ model: 'm', messages, max_tokens: null }, chars)).not.toHaveProperty('maxTokens');
  });

  it('turns a non-text content part into a 400 naming it under body/', () => {
    expect(badRequest(() => chatJob({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, chars))).toBe(
      "body/messages/0/content/0: only text content parts are supported, got type 'image_url'",
    );
  });

  it('refuses a prompt with no tokens, naming messages', () => {
    const none: PromptTokenizer = { ...chars, encode: () => [] };
    expect(badRequest(() => chatJob({ model: 'm', messages: [{ role: 'user', content: '' }] }, none))).toBe('body/messages: the prompt has no tokens');
  });
});

describe('completionsJob', () => {
  it('encodes a string prompt', () => {
    const job = completionsJob({ model: 'm', prompt: 'ab' }, chars);
    expect(job).toMatchObject({ endpoint: 'completions', promptText: 'ab', promptIds: [97, 98] });
  });

  it('sends token ids as given, without encoding, and with no prompt text', () => {
    let encoded = 0;
    const counting: PromptTokenizer = { ...chars, encode: (t) => (encoded++, chars.encode(t)) };
    const job = completionsJob({ model: 'm', prompt: [5, 0, 7] }, counting);
    expect(job).toMatchObject({ promptText: '', promptIds: [5, 0, 7] });
    expect(encoded).toBe(0);
  });

  it('takes a list of one string prompt, and refuses more than one', () => {
    expect(completionsJob({ model: 'm', prompt: ['z'] }, chars).promptIds).toEqual([122]);
    expect(badRequest(() => completionsJob({ model: 'm', prompt: ['a', 'b'] }, chars))).toBe('body/prompt: only one prompt per request is supported, got 2');
  });

  it('refuses an empty prompt, naming prompt', () => {
    expect(badRequest(() => completionsJob({ model: 'm', prompt: '' }, chars))).toBe('body/prompt: the prompt has no tokens');
  });
});

describe('the fields both endpoints share', () => {
  const base = { model: 'm', prompt: 'p' };

  it('accept n of 1 or absent or null, and refuse any other n', () => {
    for (const fields of [{ n: 1 }, { n: null }, {}]) expect(() => completionsJob({ ...base, ...fields }, chars)).not.toThrow();
    expect(badRequest(() => completionsJob({ ...base, n: 2 }, chars))).toBe('body/n must be 1 (one choice per request is supported), got 2');
    expect(badRequest(() => completionsJob({ ...base, n: 0 }, chars))).toContain('got 0');
  });

  it('check n before the prompt is judged empty', () => {
    expect(badRequest(() => completionsJob({ ...base, prompt: '', n: 3 }, chars))).toContain('body/n must be 1');
  });

  it('make stop a list, a single string one entry, and drop empty stop strings', () => {
    expect(completionsJob({ ...base, stop: 'END' }, chars).stop).toEqual(['END']);
    expect(completionsJob({ ...base, stop: ['a', '', 'b'] }, chars).stop).toEqual(['a', 'b']);
    expect(completionsJob({ ...base, stop: '' }, chars).stop).toEqual([]);
    expect(completionsJob({ ...base, stop: null }, chars).stop).toEqual([]);
  });

  it('keep temperature and seed when given, including zero, and leave them out when null', () => {
    expect(completionsJob({ ...base, temperature: 0, seed: 0 }, chars)).toMatchObject({ temperature: 0, seed: 0 });
    const job = completionsJob({ ...base, temperature: null, seed: null }, chars);
    expect(job).not.toHaveProperty('temperature');
    expect(job).not.toHaveProperty('seed');
  });

  it('stream only for stream: true, and include usage only when streaming and asked for', () => {
    expect(completionsJob({ ...base, stream: null }, chars).stream).toBe(false);
    expect(completionsJob({ ...base, stream: true, stream_options: { include_usage: true } }, chars)).toMatchObject({ stream: true, includeUsage: true });
    expect(completionsJob({ ...base, stream: true, stream_options: null }, chars).includeUsage).toBe(false);
    expect(completionsJob({ ...base, stream: false, stream_options: { include_usage: true } }, chars).includeUsage).toBe(false);
  });
});
