// Retry timing of the load client: grpc-retry-pushback-ms read strictly (gRPC A6), Retry-After
// read leniently (HTTP), and the jittered exponential backoff used when the server says nothing.
import { Metadata } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { parseRetryAfter, PUSHBACK_KEY, readPushback, retryDelayMs } from '../../../../src/tools/load/retry.js';

const NOW = Date.parse('2026-01-05T10:00:00Z');

function trailers(...values: string[]): Metadata {
  const metadata = new Metadata();
  for (const value of values) metadata.add(PUSHBACK_KEY, value);
  return metadata;
}

describe('readPushback', () => {
  it('reads the grpc-retry-pushback-ms trailer', () => {
    expect(PUSHBACK_KEY).toBe('grpc-retry-pushback-ms');
    expect(readPushback(trailers('0'))).toBe(0);
    expect(readPushback(trailers(' 1500 '))).toBe(1500);
    expect(readPushback(trailers('9999999999'))).toBe(9_999_999_999);
  });

  it('takes the first value when the trailer is repeated', () => {
    expect(readPushback(trailers('20', '-1'))).toBe(20);
    expect(readPushback(trailers('-1', '20'))).toBe('stop');
  });

  it.each(['-1', '1.5', '+5', '1e3', '12345678901', '', 'NaN', '0x10'])('reads %j as an explicit do-not-retry', (value) => {
    expect(readPushback(trailers(value))).toBe('stop');
  });

  it('is undefined without trailers or without the key', () => {
    expect(readPushback(undefined)).toBeUndefined();
    const other = new Metadata();
    other.set('retry-after', '1');
    expect(readPushback(other)).toBeUndefined();
  });
});

describe('parseRetryAfter edges', () => {
  it('rounds a fraction of a second to the millisecond and refuses more than six decimals', () => {
    expect(parseRetryAfter('0.0004', NOW)).toBe(0);
    expect(parseRetryAfter('0.0015', NOW)).toBe(2);
    expect(parseRetryAfter('1.123456', NOW)).toBe(1123);
    expect(parseRetryAfter('1.1234567', NOW)).toBeUndefined();
    expect(parseRetryAfter('1.', NOW)).toBeUndefined();
    expect(parseRetryAfter('.5', NOW)).toBeUndefined();
  });

  it('refuses more than ten digits of seconds', () => {
    expect(parseRetryAfter('9999999999', NOW)).toBe(9_999_999_999_000);
    expect(parseRetryAfter('99999999999', NOW)).toBeUndefined();
  });

  it('refuses a date of the right shape that is no date, and dates in the wrong case', () => {
    expect(parseRetryAfter('Mon, 32 Jan 2026 10:00:00 GMT', NOW)).toBeUndefined();
    expect(parseRetryAfter('Mon, 05 Jan 2026 25:00:00 GMT', NOW)).toBeUndefined();
    expect(parseRetryAfter('mon, 05 jan 2026 10:00:03 gmt', NOW)).toBeUndefined();
    expect(parseRetryAfter('Mon, 5 Jan 2026 10:00:03 GMT', NOW)).toBeUndefined();
  });
});

describe('retryDelayMs', () => {
  it('gives a pushback of 0 as an immediate retry, not as "no pushback"', () => {
    expect(retryDelayMs(5, 0, 50, 5000, () => 0.9)).toBe(0);
  });

  it('uses a pushback as is, even beyond the backoff cap (the caller caps Retry-After)', () => {
    expect(retryDelayMs(0, 60_000, 50, 5000, () => 0)).toBe(60_000);
  });

  it('never retries after a stop, whatever the attempt', () => {
    for (let attempt = 0; attempt < 5; attempt++) expect(retryDelayMs(attempt, 'stop', 50, 5000, () => 0.5)).toBeUndefined();
  });

  it('doubles the backoff per attempt up to the cap, with jitter in [d/2, d)', () => {
    const random = mulberry32(7);
    for (let attempt = 0; attempt < 12; attempt++) {
      const ceiling = Math.min(1000, 50 * 2 ** attempt);
      for (let i = 0; i < 200; i++) {
        const delay = retryDelayMs(attempt, undefined, 50, 1000, random)!;
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
        expect(delay).toBeLessThan(ceiling);
      }
    }
  });

  it('maps the random draw linearly onto the jitter range', () => {
    expect(retryDelayMs(1, undefined, 50, 5000, () => 0)).toBe(50);
    expect(retryDelayMs(1, undefined, 50, 5000, () => 0.5)).toBe(75);
    expect(retryDelayMs(1, undefined, 100, 150, () => 0.5)).toBe(112.5);
  });

  it('stays at the cap for an attempt so large that 2^attempt overflows', () => {
    expect(retryDelayMs(5000, undefined, 50, 5000, () => 0)).toBe(2500);
  });
});
