// The SSE parser of the --openai load mode: whatever way the network splits the stream, the
// same events come out, and a stream cut mid-event yields nothing for that event.
import { describe, expect, it } from 'vitest';
import { SseParser, type SseEvent } from '../../../../src/tools/load/sse.js';

const STREAM =
  ': keep-alive\n\n' +
  'data: {"choices":[{"delta":{"content":"héllo"}}]}\n\n' +
  'event: note\r\ndata: first line\r\ndata:second line\r\ndata:  two spaces\r\n\r\n' +
  'data\rdata: after a bare field\r\r' +
  'id: 7\nretry: 10\n\n' +
  'data: [DONE]\n\n';

const EXPECTED: SseEvent[] = [
  { event: 'message', data: '{"choices":[{"delta":{"content":"héllo"}}]}' },
  { event: 'note', data: 'first line\nsecond line\n two spaces' },
  { event: 'message', data: '\nafter a bare field' },
  { event: 'message', data: '[DONE]' },
];

function feedBytes(bytes: Uint8Array, cuts: number[]): SseEvent[] {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    events.push(...parser.pushBytes(bytes.subarray(from, cut)));
    from = cut;
  }
  events.push(...parser.end());
  return events;
}

describe('SseParser', () => {
  it('parses data lines, multi-line data, event names, comments and every line ending', () => {
    expect(feedBytes(new TextEncoder().encode(STREAM), [])).toEqual(EXPECTED);
  });

  it('gives the same events for every split into two reads (inside lines, CRLF pairs and UTF-8 characters)', () => {
    const bytes = new TextEncoder().encode(STREAM);
    for (let cut = 0; cut <= bytes.length; cut++) expect(feedBytes(bytes, [cut]), `cut at byte ${cut}`).toEqual(EXPECTED);
  });

  it('gives the same events when every byte is its own read', () => {
    const bytes = new TextEncoder().encode(STREAM);
    expect(
      feedBytes(
        bytes,
        Array.from({ length: bytes.length }, (_, i) => i),
      ),
    ).toEqual(EXPECTED);
  });

  it('does not join a CR at the end of one read with a later LF that starts a blank line', () => {
    const parser = new SseParser();
    expect(parser.push('data: a\r')).toEqual([]);
    // The LF completes the CRLF of "data: a"; only the second line end dispatches.
    expect(parser.push('\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ event: 'message', data: 'a' }]);
  });

  it('dispatches nothing for blank lines without data, and drops an event the stream cut off', () => {
    const parser = new SseParser();
    expect(parser.push('\n\n: only a comment\n\nevent: x\n\n')).toEqual([]);
    expect(parser.push('data: [DONE]\n')).toEqual([]);
    expect(parser.end()).toEqual([]);
  });

  it('keeps a partial line across reads until its line end arrives', () => {
    const parser = new SseParser();
    expect(parser.push('data: {"a"')).toEqual([]);
    expect(parser.push(':1}')).toEqual([]);
    expect(parser.push('\n\ndata: [DO')).toEqual([{ event: 'message', data: '{"a":1}' }]);
    expect(parser.push('NE]\n\n')).toEqual([{ event: 'message', data: '[DONE]' }]);
  });
});
