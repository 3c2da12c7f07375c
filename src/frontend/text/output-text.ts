/**
 * Output token ids to the text a client sees: the tokenizer's incremental decoder followed by
 * the stop strings. One instance per request; the generation loop feeds it ids as they come.
 */
import type { PromptTokenizer, TokenDecoder } from './prompt-tokenizer.js';
import { StopMatcher, type StopResult } from './stop-strings.js';

export class OutputText {
  private readonly decoder: TokenDecoder;
  private readonly stops: StopMatcher;

  constructor(tokenizer: PromptTokenizer, stops: readonly string[]) {
    this.decoder = tokenizer.decoder();
    this.stops = new StopMatcher(stops);
  }

  /** New ids in; the text now safe to send, and whether a stop string ended the output. */
  push(ids: readonly number[]): StopResult {
    return this.stops.push(this.decoder.push(ids));
  }

  /** The output ended (not by a stop string): every held-back character, decoded and checked. */
  finish(): StopResult {
    const last = this.stops.push(this.decoder.flush());
    if (last.stopped) return last;
    return { text: last.text + this.stops.flush(), stopped: false };
  }
}
