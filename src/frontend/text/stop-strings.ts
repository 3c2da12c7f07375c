/**
 * OpenAI `stop` strings, applied by the frontend to the decoded text: the output ends just
 * before the first occurrence of any stop string (the stop string itself is not returned).
 * While streaming, the tail of the text that could still become a stop string is held back,
 * so no piece of a stop string ever reaches the client; it is released as soon as it cannot.
 */

export interface StopResult {
  /** Text that is now safe to send. */
  readonly text: string;
  /** A stop string was found: `text` is the last piece, the output is over. */
  readonly stopped: boolean;
}

export class StopMatcher {
  private held = '';
  private done = false;
  private readonly stops: readonly string[];

  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  push(piece: string): StopResult {
    if (this.done) return { text: '', stopped: true };
    if (this.stops.length === 0) return { text: piece, stopped: false };
    const text = this.held + piece;
    let first = -1;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    if (first >= 0) {
      this.done = true;
      this.held = '';
      return { text: text.slice(0, first), stopped: true };
    }
    const keep = this.partialTail(text);
    this.held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** At the end of the output: the held-back tail (it never completed a stop string). */
  flush(): string {
    const rest = this.done ? '' : this.held;
    this.held = '';
    return rest;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
  private partialTail(text: string): number {
    let best = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > best; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
