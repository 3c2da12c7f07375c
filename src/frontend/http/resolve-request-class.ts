/**
 * A request's class from its HTTP request: its priority and its tenant.
 *
 *   priority  the `x-request-priority` header, else the body's `priority` (vLLM's extension
 *             field), else --default-priority; an int32, lower runs sooner
 *   tenant    the `x-tenant-id` header, else the body's `user` (OpenAI's field), else none
 *             (anonymous: not capped, not in the per-tenant metrics)
 *
 * The header wins because it is what a gateway in front of the frontend sets, and a gateway
 * knows better than the client's body. A bad value is a 400 naming the header or field (a
 * priority or tenant silently dropped would change how the request is treated); the body's
 * types are checked by the schema already.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { checkPriority, checkTenant, parsePriority, parseSloTtft, PRIORITY_HEADER, SLO_TTFT_HEADER, TENANT_HEADER } from '../../protocol/request-class.js';
import { FrontendError } from '../generate/errors.js';

export interface RequestClass {
  readonly priority: number;
  /** undefined: anonymous. */
  readonly tenant: string | undefined;
  /** The request's own TTFT SLO (x-slo-ttft-ms), which may tighten the frontend's, never loosen it; undefined: none. */
  readonly ttftSloMs: number | undefined;
}

/** The body fields read here (both OpenAI bodies carry them). */
export interface ClassFields {
  readonly priority?: number | null;
  readonly user?: string | null;
}

export function resolveRequestClass(headers: IncomingHttpHeaders, body: ClassFields, defaultPriority: number): RequestClass {
  return { priority: priorityOf(headers, body, defaultPriority), tenant: tenantOf(headers, body), ttftSloMs: ttftSloOf(headers) };
}

function ttftSloOf(headers: IncomingHttpHeaders): number | undefined {
  const header = headerValue(headers, SLO_TTFT_HEADER);
  if (header === undefined) return undefined;
  return valueOr400(parseSloTtft(header), `header ${SLO_TTFT_HEADER}`);
}

function priorityOf(headers: IncomingHttpHeaders, body: ClassFields, defaultPriority: number): number {
  const header = headerValue(headers, PRIORITY_HEADER);
  if (header !== undefined) return valueOr400(parsePriority(header), `header ${PRIORITY_HEADER}`);
  if (body.priority !== undefined && body.priority !== null) return valueOr400(checkPriority(body.priority), 'body/priority');
  return defaultPriority;
}

function tenantOf(headers: IncomingHttpHeaders, body: ClassFields): string | undefined {
  const header = headerValue(headers, TENANT_HEADER);
  if (header !== undefined) return valueOr400(checkTenant(header), `header ${TENANT_HEADER}`);
  if (body.user !== undefined && body.user !== null) return valueOr400(checkTenant(body.user), 'body/user');
  return undefined;
}

/** node joins a header sent twice with ", ", which no check accepts: two values are a 400, not a guess. */
function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function valueOr400<T extends number | string>(checked: T | { problem: string }, where: string): T {
  if (typeof checked === 'object') throw new FrontendError('bad_request', `${where}: ${checked.problem}`);
  return checked;
}
