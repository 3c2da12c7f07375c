/**
 * Retry timing for RESOURCE_EXHAUSTED. Server pushback wins, as in gRPC's retry design
 * (A6): `grpc-retry-pushback-ms` >= 0 is the exact delay before the next attempt; a negative
 * or malformed value means "do not retry". Without pushback: exponential backoff with
 * jitter, uniform in [d/2, d) for d = min(max, base * 2^attempt).
 */
import type { Metadata } from '@grpc/grpc-js';
import type { Random } from '../engine/prng.js';

export const PUSHBACK_KEY = 'grpc-retry-pushback-ms';

/** Pushback from trailers: ms >= 0, 'stop' for an explicit do-not-retry, undefined when absent. */
export function readPushback(metadata: Metadata | undefined): number | 'stop' | undefined {
  const value = metadata?.get(PUSHBACK_KEY)[0];
  if (value === undefined) return undefined;
  const text = String(value).trim();
  return /^\d{1,10}$/.test(text) ? Number(text) : 'stop';
}

/** Delay before retry number `attempt + 1` (attempt 0 = after the first rejection); undefined = give up. */
export function retryDelayMs(attempt: number, pushback: number | 'stop' | undefined, baseMs: number, maxMs: number, random: Random): number | undefined {
  if (pushback === 'stop') return undefined;
  if (pushback !== undefined) return pushback;
  const ceiling = Math.min(maxMs, baseMs * 2 ** attempt);
  return ceiling / 2 + random() * (ceiling / 2);
}
