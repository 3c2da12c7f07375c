/**
 * Chat messages to one prompt string. The frontend has no model chat template (the default
 * tokenizer has none, and running Jinja templates is out of scope), so it uses one documented
 * plain template that any tokenizer can encode:
 *
 *   <role>: <content>\n      for each message, in order
 *   assistant:               at the end, for the model to continue
 *
 * Content is a string, null (e.g. an assistant message with only tool calls: empty), or an
 * array of parts of which only {type:"text", text} is supported; text parts are concatenated.
 */

export interface TextPart {
  readonly type: string;
  readonly text?: string;
}

export interface ChatMessage {
  readonly role: string;
  readonly content?: string | readonly TextPart[] | null;
}

/** Thrown for content this frontend cannot turn into text (e.g. an image part). */
export class UnsupportedContentError extends Error {}

export function messageText(message: ChatMessage, index: number): string {
  const content = message.content;
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  let text = '';
  for (const [partIndex, part] of content.entries()) {
    if (part.type !== 'text' || typeof part.text !== 'string') {
      throw new UnsupportedContentError(`messages/${index}/content/${partIndex}: only text content parts are supported, got type '${part.type}'`);
    }
    text += part.text;
  }
  return text;
}

export function renderChatPrompt(messages: readonly ChatMessage[]): string {
  return messages.map((m, i) => `${m.role}: ${messageText(m, i)}\n`).join('') + 'assistant:';
}
