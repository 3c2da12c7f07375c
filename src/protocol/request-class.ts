/**
 * A request's class: its priority and its tenant, as they travel from the frontend to the
 * sidecar (gRPC metadata) and as any other client may send them.
 *
 *   x-request-priority  an int32, lower runs sooner (vLLM's `priority`: its scheduler and its
 *                       native gRPC request field 12 use the same order)
 *   x-tenant-id         1-256 visible ASCII characters (the OpenAI `user` field, or the header)
 *
 * Both halves parse them here, so a value the frontend forwards is one the sidecar accepts.
 */
export const PRIORITY_HEADER = 'x-request-priority';
export const TENANT_HEADER = 'x-tenant-id';
/**
 * A request's own TTFT SLO in ms (the Gateway API Inference Extension's header): it may tighten the
 * frontend's --ttft-slo-ms, never loosen it, and the frontend sends each attempt what is left of
 * it, so a sidecar (--ttft-slo-ms) never queues a retried request past what its client can wait.
 */
export const SLO_TTFT_HEADER = 'x-slo-ttft-ms';
export const MAX_SLO_TTFT_MS = 86_400_000;

/** The SLO in force: `own` (a request's x-slo-ttft-ms) may tighten `configured`, never loosen it; undefined: neither. */
export function tighterSlo(configured: number | null | undefined, own: number | undefined): number | undefined {
  if (own === undefined) return configured ?? undefined;
  return configured === null || configured === undefined ? own : Math.min(configured, own);
}

/** The header's value: an integer 1..MAX_SLO_TTFT_MS, else a problem. */
export function parseSloTtft(text: string): number | { problem: string } {
  const ms = /^\d{1,8}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  return ms >= 1 && ms <= MAX_SLO_TTFT_MS ? ms : { problem: `must be an integer number of ms in 1..${MAX_SLO_TTFT_MS}, got ${JSON.stringify(text)}` };
}

/** vLLM's field is an int32. */
export const MIN_PRIORITY = -(2 ** 31);
export const MAX_PRIORITY = 2 ** 31 - 1;
export const MAX_TENANT_LENGTH = 256;

/** A priority as a decimal integer in int32 range, or a message saying what is wrong with it. */
export function parsePriority(text: string): number | { problem: string } {
  const trimmed = text.trim();
  if (!/^[+-]?\d{1,10}$/u.test(trimmed)) return { problem: `priority must be an integer, got ${JSON.stringify(text.slice(0, 40))}` };
  return checkPriority(Number(trimmed));
}

/** A priority already a number (the OpenAI body's field): an integer in int32 range, or a problem. */
export function checkPriority(value: number): number | { problem: string } {
  if (!Number.isInteger(value)) return { problem: `priority must be an integer, got ${value}` };
  if (value < MIN_PRIORITY || value > MAX_PRIORITY) return { problem: `priority must be between ${MIN_PRIORITY} and ${MAX_PRIORITY}, got ${value}` };
  return value === 0 ? 0 : value; // -0 is 0
}

/** A tenant id: 1-256 visible ASCII characters (it goes into a header and a metric label), or a problem. */
export function checkTenant(text: string): string | { problem: string } {
  if (text.length === 0) return { problem: 'tenant must not be empty' };
  if (text.length > MAX_TENANT_LENGTH) return { problem: `tenant must be at most ${MAX_TENANT_LENGTH} characters, got ${text.length}` };
  if (!/^[\x21-\x7e]+$/u.test(text)) return { problem: 'tenant must be visible ASCII characters (no spaces or control characters)' };
  return text;
}
