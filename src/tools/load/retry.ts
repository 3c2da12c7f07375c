/**
 * Retry timing for RESOURCE_EXHAUSTED (gRPC) and the overload status (HTTP 529). Server
 * pushback wins, as in gRPC's retry design (A6): `grpc-retry-pushback-ms` >= 0 is the exact
 * delay before the next attempt; a negative or malformed value means "do not retry". Over
 * HTTP the pushback is `Retry-After` (seconds or an HTTP date); a malformed one is ignored, as
 * HTTP says, and the caller caps it (a frontend's "come back in an hour" must not stall a
 * load run). Without pushback: exponential backoff with jitter, uniform in [d/2, d) for
 * d = min(max, base * 2^attempt).
 */
import type { Metadata } from '@grpc/grpc-js';
import type { Random } from '../../platform/prng.js';

export const PUSHBACK_KEY = 'grpc-retry-pushback-ms';

/** Pushback from trailers: ms >= 0, 'stop' for an explicit do-not-retry, undefined when absent. */
export function readPushback(metadata: Metadata | undefined): number | 'stop' | undefined {
  const value = metadata?.get(PUSHBACK_KEY)[0];
  if (value === undefined) return undefined;
  const text = String(value).trim();
  return /^\d{1,10}$/.test(text) ? Number(text) : 'stop';
}

// IMF-fixdate, RFC 850 and asctime, the three HTTP-date forms (RFC 9110 section 5.6.7).
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC_850 = /^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME = /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * `Retry-After` as a delay in ms from `nowMs`: delay-seconds (a fraction is accepted too) or
 * an HTTP date (a date in the past is 0). Undefined when absent or malformed.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d{1,10}(\.\d{1,6})?$/.test(text)) return Math.round(Number(text) * 1000);
  let date: number;
  if (IMF_FIXDATE.test(text) || RFC_850.test(text)) date = Date.parse(text);
  else if (ASCTIME.test(text))
    date = Date.parse(`${text} GMT`); // asctime has no zone and means GMT
  else return undefined;
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/** Delay before retry number `attempt + 1` (attempt 0 = after the first rejection); undefined = give up. */
export function retryDelayMs(attempt: number, pushback: number | 'stop' | undefined, baseMs: number, maxMs: number, random: Random): number | undefined {
  if (pushback === 'stop') return undefined;
  if (pushback !== undefined) return pushback;
  const ceiling = Math.min(maxMs, baseMs * 2 ** attempt);
  return ceiling / 2 + random() * (ceiling / 2);
}
