// The OpenAI response objects: field names, null fields and order as OpenAI returns them.
import { describe, expect, it } from 'vitest';
import { ChunkShapes, idPrefix, usage, wholeResponse } from '../../../../src/frontend/http/openai-shapes.js';

const head = { id: 'x-1', created: 1_700_000_000, model: 'm' };

describe('usage', () => {
  it('adds prompt and completion tokens into total_tokens', () => {
    expect(usage(3, 4)).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
    expect(usage(5, 0)).toEqual({ prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 });
  });
});

describe('idPrefix', () => {
  it('is chatcmpl- for chat and cmpl- for completions', () => {
    expect(idPrefix('chat_completions')).toBe('chatcmpl-');
    expect(idPrefix('completions')).toBe('cmpl-');
  });
});

describe('wholeResponse', () => {
  it('is a chat.completion with the text as the assistant message', () => {
    const body = wholeResponse('chat_completions', head, 'hi', 'length', usage(1, 2));
    expect(body).toEqual({
      ...head,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, logprobs: null, finish_reason: 'length' }],
      usage: usage(1, 2),
    });
    // OpenAI's own field order: clients that print the JSON see the same layout.
    expect(Object.keys(body)).toEqual(['id', 'created', 'model', 'object', 'choices', 'usage']);
  });

  it('is a text_completion with the text in the choice', () => {
    expect(wholeResponse('completions', head, '', 'stop', usage(1, 0))).toEqual({
      ...head,
      object: 'text_completion',
      choices: [{ index: 0, text: '', logprobs: null, finish_reason: 'stop' }],
      usage: usage(1, 0),
    });
  });
});

describe('ChunkShapes for chat', () => {
  const shapes = new ChunkShapes('chat_completions', head, false);

  it('opens with the assistant role and empty content', () => {
    expect(shapes.opening()).toEqual({
      ...head,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
    });
  });

  it('carries text as delta content and ends with an empty delta and the finish reason', () => {
    expect(shapes.text('ab')).toMatchObject({ choices: [{ delta: { content: 'ab' }, finish_reason: null }] });
    expect(shapes.finish('stop')).toMatchObject({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] });
  });

  it('has no usage field and no usage chunk when usage was not asked for', () => {
    expect(shapes.text('a')).not.toHaveProperty('usage');
    expect(shapes.usage(usage(1, 1))).toBeUndefined();
  });
});

describe('ChunkShapes for completions', () => {
  const shapes = new ChunkShapes('completions', head, false);

  it('has no opening chunk', () => {
    expect(shapes.opening()).toBeUndefined();
  });

  it('carries text in the choice, and finishes with empty text', () => {
    expect(shapes.text('ab')).toEqual({ ...head, object: 'text_completion', choices: [{ index: 0, text: 'ab', logprobs: null, finish_reason: null }] });
    expect(shapes.finish('length')).toEqual({ ...head, object: 'text_completion', choices: [{ index: 0, text: '', logprobs: null, finish_reason: 'length' }] });
  });
});

describe('ChunkShapes with include_usage', () => {
  it.each([
    ['chat_completions', 'chat.completion.chunk'],
    ['completions', 'text_completion'],
  ] as const)('for %s, gives every chunk usage: null and ends with a usage chunk with no choices', (endpoint, object) => {
    const shapes = new ChunkShapes(endpoint, head, true);
    expect(shapes.text('a')).toHaveProperty('usage', null);
    expect(shapes.finish('stop')).toHaveProperty('usage', null);
    if (endpoint === 'chat_completions') expect(shapes.opening()).toHaveProperty('usage', null);
    expect(shapes.usage(usage(2, 3))).toEqual({ ...head, object, choices: [], usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } });
  });
});
