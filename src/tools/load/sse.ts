/**
 * Incremental Server-Sent Events parser (the WHATWG event-stream rules, as OpenAI-compatible
 * servers stream completions). Network reads split the stream anywhere, inside a line, a CRLF
 * pair or a UTF-8 character, so bytes are decoded with a streaming decoder and a partial line
 * waits for the next read. Lines end in LF, CR or CRLF; `data:` lines of one event are joined
 * with LF; `:` lines are comments; a blank line dispatches the event. At the end of the
 * stream an event without its blank line is dropped, as the standard says: a stream cut
 * mid-event must not look like a finished one.
 */

export interface SseEvent {
  /** The `event:` field, or 'message'. */
  readonly event: string;
  /** The `data:` lines joined with LF. */
  readonly data: string;
}

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  /** Text of the line not ended yet. */
  private partial = '';
  /** The previous read ended in CR: an LF starting the next one belongs to the same line end. */
  private skipLf = false;
  private data: string[] = [];
  private eventType = '';

  /** Feeds raw bytes from the network; returns the events they completed. */
  pushBytes(bytes: Uint8Array): SseEvent[] {
    return this.push(this.decoder.decode(bytes, { stream: true }));
  }

  /** Feeds decoded text; returns the events it completed. */
  push(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    if (text.length === 0) return events;
    const skip = this.skipLf && text.charCodeAt(0) === 0x0a ? 1 : 0;
    this.skipLf = false;
    const buffer = this.partial + (skip ? text.slice(1) : text);
    // The partial line holds no line end: scanning starts after it.
    let pos = this.partial.length;
    let lineStart = 0;
    // Scan for line ends; remember the next CR and LF so that each search runs once per line.
    let nextLf = buffer.indexOf('\n', pos);
    let nextCr = buffer.indexOf('\r', pos);
    for (;;) {
      if (nextLf !== -1 && nextLf < pos) nextLf = buffer.indexOf('\n', pos);
      if (nextCr !== -1 && nextCr < pos) nextCr = buffer.indexOf('\r', pos);
      const end = nextLf === -1 ? nextCr : nextCr === -1 ? nextLf : Math.min(nextLf, nextCr);
      if (end === -1) break;
      this.line(buffer.slice(lineStart, end), events);
      pos = end + 1;
      if (end === nextCr) {
        if (pos === buffer.length) this.skipLf = true;
        else if (buffer.charCodeAt(pos) === 0x0a) pos += 1;
      }
      lineStart = pos;
    }
    this.partial = buffer.slice(lineStart);
    return events;
  }

  /** End of the stream: flushes the decoder; an unterminated event is dropped. */
  end(): SseEvent[] {
    const events = this.push(this.decoder.decode());
    this.partial = '';
    this.data = [];
    this.eventType = '';
    return events;
  }

  private line(line: string, events: SseEvent[]): void {
    if (line.length === 0) {
      if (this.data.length > 0) events.push({ event: this.eventType || 'message', data: this.data.join('\n') });
      this.data = [];
      this.eventType = '';
      return;
    }
    if (line.charCodeAt(0) === 0x3a) return; // ':' comment (keep-alives)
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.eventType = value;
    // id and retry are for EventSource reconnection, which a load client does not do.
  }
}
