// The plain chat template: message content to text, and the whole prompt the worker is sent.
import { describe, expect, it } from 'vitest';
import { messageText, renderChatPrompt, UnsupportedContentError } from '../../../../src/frontend/text/chat-prompt.js';

describe('messageText', () => {
  it('reads absent and null content as empty text (an assistant turn with only tool calls)', () => {
    expect(messageText({ role: 'assistant' }, 0)).toBe('');
    expect(messageText({ role: 'assistant', content: null }, 0)).toBe('');
  });

  it('returns string content unchanged, newlines and surrounding spaces included', () => {
    expect(messageText({ role: 'user', content: '  two\nlines ' }, 0)).toBe('  two\nlines ');
  });

  it('concatenates text parts in order with nothing between them, and reads no parts as empty', () => {
    expect(
      messageText(
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: '' },
            { type: 'text', text: 'b c' },
          ],
        },
        0,
      ),
    ).toBe('ab c');
    expect(messageText({ role: 'user', content: [] }, 0)).toBe('');
  });

  it('refuses a text part without a string text, naming the message index it was given and the part', () => {
    const error = (() => {
      try {
        messageText({ role: 'user', content: [{ type: 'text', text: 'ok' }, { type: 'text' }] }, 3);
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(UnsupportedContentError);
    expect((error as Error).message).toBe("messages/3/content/1: only text content parts are supported, got type 'text'");
  });
});

describe('renderChatPrompt', () => {
  it('is just the assistant cue for no messages', () => {
    expect(renderChatPrompt([])).toBe('assistant:');
  });

  it('keeps the messages in order with their roles as given (no role is special)', () => {
    expect(
      renderChatPrompt([
        { role: 'tool', content: '42' },
        { role: 'user', content: 'why?' },
        { role: 'developer', content: 'x' },
      ]),
    ).toBe('tool: 42\nuser: why?\ndeveloper: x\nassistant:');
  });

  it('names the index of the offending message in the whole list', () => {
    expect(() =>
      renderChatPrompt([
        { role: 'user', content: 'fine' },
        { role: 'user', content: [{ type: 'input_audio' }] },
      ]),
    ).toThrow("messages/1/content/0: only text content parts are supported, got type 'input_audio'");
  });
});
