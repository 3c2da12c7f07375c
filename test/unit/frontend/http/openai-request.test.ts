// A validated OpenAI body to the one job generation runs: the prompt as given (text or ids), sampling, stop strings, streaming flags.
import { describe, expect, it } from 'vitest';
import { badRequest } from '../../../support/bad-request.js';
import { chatJob, completionsJob } from '../../../../src/frontend/http/openai-request.js';

describe('chatJob', () => {
  it('renders the messages with the chat template, as the text to tokenize', () => {
    const job = chatJob({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(job).toEqual({
      endpoint: 'chat_completions',
      model: 'm',
      input: { text: 'user: hi\nassistant:' },
      promptField: 'messages',
      stop: [],
      stream: false,
      includeUsage: false,
    });
  });

  it('prefers max_completion_tokens over the deprecated max_tokens, and falls back to it when null', () => {
    const messages = [{ role: 'user', content: 'x' }];
    expect(chatJob({ model: 'm', messages, max_tokens: 5, max_completion_tokens: 7 }).maxTokens).toBe(7);
    expect(chatJob({ model: 'm', messages, max_tokens: 5, max_completion_tokens: null }).maxTokens).toBe(5);
    expect(chatJob({ model: 'm', messages, max_tokens: null })).not.toHaveProperty('maxTokens');
  });

  it('turns a non-text content part into a 400 naming it under body/', () => {
    expect(badRequest(() => chatJob({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }))).toBe(
      "body/messages/0/content/0: only text content parts are supported, got type 'image_url'",
    );
  });
});

describe('completionsJob', () => {
  it('keeps a string prompt as the text to tokenize, naming prompt', () => {
    expect(completionsJob({ model: 'm', prompt: 'ab' })).toMatchObject({ endpoint: 'completions', input: { text: 'ab' }, promptField: 'prompt' });
  });

  it('keeps token ids as given, with no text', () => {
    expect(completionsJob({ model: 'm', prompt: [5, 0, 7] }).input).toEqual({ ids: [5, 0, 7] });
  });

  it('takes a list of one string prompt, and refuses more than one', () => {
    expect(completionsJob({ model: 'm', prompt: ['z'] }).input).toEqual({ text: 'z' });
    expect(badRequest(() => completionsJob({ model: 'm', prompt: ['a', 'b'] }))).toBe('body/prompt: only one prompt per request is supported, got 2');
  });
});

describe('the fields both endpoints share', () => {
  const base = { model: 'm', prompt: 'p' };

  it('accept n of 1 or absent or null, and refuse any other n', () => {
    for (const fields of [{ n: 1 }, { n: null }, {}]) expect(() => completionsJob({ ...base, ...fields })).not.toThrow();
    expect(badRequest(() => completionsJob({ ...base, n: 2 }))).toBe('body/n must be 1 (one choice per request is supported), got 2');
    expect(badRequest(() => completionsJob({ ...base, n: 0 }))).toContain('got 0');
  });

  it('make stop a list, a single string one entry, and drop empty stop strings', () => {
    expect(completionsJob({ ...base, stop: 'END' }).stop).toEqual(['END']);
    expect(completionsJob({ ...base, stop: ['a', '', 'b'] }).stop).toEqual(['a', 'b']);
    expect(completionsJob({ ...base, stop: '' }).stop).toEqual([]);
    expect(completionsJob({ ...base, stop: null }).stop).toEqual([]);
  });

  it('keep temperature and seed when given, including zero, and leave them out when null', () => {
    expect(completionsJob({ ...base, temperature: 0, seed: 0 })).toMatchObject({ temperature: 0, seed: 0 });
    const job = completionsJob({ ...base, temperature: null, seed: null });
    expect(job).not.toHaveProperty('temperature');
    expect(job).not.toHaveProperty('seed');
  });

  it('stream only for stream: true, and include usage only when streaming and asked for', () => {
    expect(completionsJob({ ...base, stream: null }).stream).toBe(false);
    expect(completionsJob({ ...base, stream: true, stream_options: { include_usage: true } })).toMatchObject({ stream: true, includeUsage: true });
    expect(completionsJob({ ...base, stream: true, stream_options: null }).includeUsage).toBe(false);
    expect(completionsJob({ ...base, stream: false, stream_options: { include_usage: true } }).includeUsage).toBe(false);
  });
});
