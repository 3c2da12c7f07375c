// Retry-After, the pushback of the --openai mode: seconds or an HTTP date; junk is ignored.
import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryDelayMs } from '../../../../src/tools/load/retry.js';

const NOW = Date.parse('2026-01-05T10:00:00Z');

describe('parseRetryAfter', () => {
  it('reads delay-seconds (and a lenient fraction) as ms', () => {
    expect(parseRetryAfter('1', NOW)).toBe(1000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter('120', NOW)).toBe(120_000);
    expect(parseRetryAfter('0.25', NOW)).toBe(250);
  });

  it('reads the three HTTP-date forms as the time left, and a past date as 0', () => {
    expect(parseRetryAfter('Mon, 05 Jan 2026 10:00:03 GMT', NOW)).toBe(3000);
    expect(parseRetryAfter('Monday, 05-Jan-26 10:00:02 GMT', NOW)).toBe(2000);
    expect(parseRetryAfter('Mon Jan  5 10:00:04 2026', NOW)).toBe(4000);
    expect(parseRetryAfter(new Date(NOW + 1500).toUTCString(), NOW)).toBe(1000); // dates have whole seconds
    expect(parseRetryAfter('Mon, 05 Jan 2026 09:59:00 GMT', NOW)).toBe(0);
  });

  it('ignores an absent or malformed value (HTTP says so), never reading it as "stop"', () => {
    for (const value of [null, undefined, '', '-1', 'soon', '1e3', '2026-01-05T10:00:03Z', 'Mon, 05 Jan 2026 10:00:03']) {
      expect(parseRetryAfter(value, NOW), String(value)).toBeUndefined();
    }
  });

  it('feeds retryDelayMs as an exact delay; absent falls back to the jittered backoff', () => {
    expect(retryDelayMs(0, parseRetryAfter('2', NOW), 50, 5000, () => 0.5)).toBe(2000);
    expect(retryDelayMs(0, parseRetryAfter('x', NOW), 50, 5000, () => 0)).toBe(25);
  });
});
