/**
 * Whether a prompt can be sent to a worker at all, and its bytes when it can. A worker's engine
 * refuses any gRPC message over its limit (--worker-max-message-bytes, gRPC's 4 MiB by default),
 * so a prompt whose Generate message would be larger is the client's 413 here, before any
 * worker is tried (the engine's own refusal would look like an overload: worker-status.ts).
 *
 * The message is the prompt's ids (1-5 bytes each) plus small fields (request id, sampling
 * parameters, stream flag, dp rank), which OTHER_FIELDS_MAX_BYTES bounds; the prompt's field
 * gets the rest. A prompt given as ids is judged in constant time first (every id takes at
 * least a byte) and then written; a text prompt is tokenized into its field, and tokenizing
 * stops at the budget. The body limit (--max-body-bytes, half the message limit by default)
 * is what keeps every body the frontend reads within a message with the default tokenizer:
 * docs/frontend.md, "Prompt size".
 */
import { encodeTokenizedInput } from '../../protocol/engine/tokenized-input.js';
import { EncodeAbortedError } from '../text/tokenizer-pool.js';
import type { EncodedPrompt, PromptEncoding } from '../text/prompt-encoding.js';
import type { PromptEncoder } from '../text/prompt-encoder.js';
import { ClientGoneError, FrontendError } from './errors.js';

/** A prompt as the request gave it: text to tokenize, or token ids (a completions prompt of integers). */
export type PromptInput = { readonly text: string } | { readonly ids: readonly number[] };

/** The most every field of a Generate request but the prompt's takes (ours take under 100 bytes). */
export const OTHER_FIELDS_MAX_BYTES = 1024;

export class PromptAdmission {
  private readonly budget: number;

  constructor(
    private readonly encoder: PromptEncoder,
    private readonly workerMaxMessageBytes: number,
  ) {
    this.budget = workerMaxMessageBytes - OTHER_FIELDS_MAX_BYTES;
  }

  /**
   * The prompt ready to send. Throws FrontendError: payload_too_large (its message would not fit
   * a worker), bad_request (no tokens; `field` names the body field); ClientGoneError when
   * `signal` fires while it waits to be tokenized.
   */
  async admit(input: PromptInput, field: string, signal: AbortSignal): Promise<EncodedPrompt> {
    let encoding: PromptEncoding;
    if ('ids' in input) {
      const bytes = input.ids.length > this.budget ? undefined : encodeTokenizedInput(input.ids, this.budget);
      encoding = bytes === undefined ? { kind: 'too_large', maxBytes: this.budget } : { kind: 'encoded', tokens: input.ids.length, tokenized: bytes };
    } else {
      try {
        encoding = await this.encoder.encode(input.text, this.budget, signal);
      } catch (error) {
        if (error instanceof EncodeAbortedError || signal.aborted) throw new ClientGoneError();
        throw new FrontendError('internal', error instanceof Error ? error.message : String(error), { cause: error });
      }
    }
    if (encoding.kind === 'too_large') {
      throw new FrontendError(
        'payload_too_large',
        `the prompt is too large for a worker: its Generate message would exceed ${this.workerMaxMessageBytes} bytes (the workers' gRPC message limit); shorten the prompt`,
      );
    }
    if (encoding.tokens === 0) throw new FrontendError('bad_request', `body/${field}: the prompt has no tokens`);
    return { tokens: encoding.tokens, tokenized: encoding.tokenized };
  }
}
