/**
 * `grpc-timeout` header: 1-8 ASCII digits and a unit (H, M, S, m, u, n), per the gRPC over
 * HTTP/2 spec. The proxy parses it once at ingress to run its own timer while a call is
 * queued, and rewrites it on dispatch so the engine sees only the time that is left.
 */
/** Longest delay node's timers take (2^31-1 ms, about 24.8 days); longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Longest grpc-timeout the sidecar forwards: whole seconds below 2^31-1 ms. Engines time
 * deadlines in 32-bit milliseconds (grpc-js truncates with `| 0`, so 720H arrives as a negative
 * timeout and fails at once); the sidecar still times the client's real deadline itself.
 */
export const MAX_FORWARDED_TIMEOUT_MS = Math.floor(MAX_TIMER_MS / 1000) * 1000;

const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
const TIMEOUT_RE = /^(\d{1,8})([HMSmun])$/;

/** Milliseconds in a `grpc-timeout` value, or `undefined` if it is not of the spec's form. */
export function parseGrpcTimeout(value: string): number | undefined {
  const match = TIMEOUT_RE.exec(value);
  if (!match) return undefined;
  return Number(match[1]) * UNIT_MS[match[2]!]!;
}

/** Formats a remaining time (ms) with the finest unit that fits in 8 digits, rounding up. */
export function formatGrpcTimeout(ms: number): string {
  const remaining = Math.max(0, ms);
  const micros = Math.ceil(remaining * 1000);
  if (micros < 1e8) return `${micros}u`;
  const millis = Math.ceil(remaining);
  if (millis < 1e8) return `${millis}m`;
  const seconds = Math.ceil(remaining / 1000);
  if (seconds < 1e8) return `${seconds}S`;
  return `${Math.min(99_999_999, Math.ceil(remaining / 3_600_000))}H`;
}
