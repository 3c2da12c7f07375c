/**
 * JSON schemas of the two OpenAI request bodies, checked by Fastify's ajv before a handler
 * runs, so a malformed body is a 400 naming its field ("body/messages must be array").
 * Only the fields the frontend uses are described; everything else OpenAI clients send
 * (logprobs, tools, ...) is allowed and ignored. Rules a schema cannot say well (n must be 1,
 * one prompt only, text parts only) are checked in openai-request.ts with their own messages.
 */

import { MAX_PRIORITY, MIN_PRIORITY } from '../../protocol/request-class.js';

const nullable = (type: string) => ({ type: [type, 'null'] });

/** uint32 in the proto; OpenAI has no upper bound. */
const maxTokens = { type: ['integer', 'null'], minimum: 1, maximum: 4_294_967_295 };

const common = {
  model: { type: 'string', minLength: 1 },
  max_tokens: maxTokens,
  n: nullable('integer'),
  stop: {
    anyOf: [{ type: 'string' }, { type: 'array', maxItems: 4, items: { type: 'string' } }, { type: 'null' }],
  },
  temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
  /** int32 in the proto. */
  seed: { type: ['integer', 'null'], minimum: -2_147_483_648, maximum: 2_147_483_647 },
  stream: nullable('boolean'),
  /** vLLM's extension field: int32, lower runs sooner (resolve-request-class.ts; the x-request-priority header wins). */
  priority: { type: ['integer', 'null'], minimum: MIN_PRIORITY, maximum: MAX_PRIORITY },
  /** OpenAI's end-user id: the tenant, unless x-tenant-id is given. */
  user: nullable('string'),
  stream_options: {
    type: ['object', 'null'],
    properties: { include_usage: nullable('boolean') },
  },
} as const;

const textPart = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string' }, text: { type: 'string' } },
} as const;

export const CHAT_COMPLETIONS_BODY = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    ...common,
    max_completion_tokens: maxTokens,
    messages: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['role'],
        properties: {
          role: { type: 'string', minLength: 1 },
          content: { anyOf: [{ type: 'string' }, { type: 'null' }, { type: 'array', items: textPart }] },
        },
      },
    },
  },
} as const;

export const COMPLETIONS_BODY = {
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    ...common,
    prompt: {
      anyOf: [
        { type: 'string' },
        { type: 'array', minItems: 1, items: { type: 'string' } },
        { type: 'array', minItems: 1, items: { type: 'integer', minimum: 0, maximum: 4_294_967_295 } },
      ],
    },
  },
} as const;
