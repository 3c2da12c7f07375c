/**
 * A call's class from its metadata: `x-request-priority` (an int32, lower runs sooner; the
 * sidecar's --default-priority when absent) and `x-tenant-id` (none: the calls without one share
 * one tenant). The frontend sends both; any gRPC client may. A value the sidecar cannot read is
 * the client's error (INVALID_ARGUMENT), never a guess: a call that meant to be urgent must not
 * quietly queue as anything else.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import { PRIORITY_HEADER, TENANT_HEADER, checkTenant, parsePriority } from '../../protocol/request-class.js';
import { DEFAULT_CALL_CLASS, type CallClass } from '../admission/waiting-room.js';
import { CallError } from './call-error.js';

/** Classes of calls without metadata, one per default priority (the common case allocates nothing). */
let lastDefault: CallClass = DEFAULT_CALL_CLASS;

export function callClassOf(headers: IncomingHttpHeaders, defaultPriority: number): CallClass | CallError {
  const priorityText = headers[PRIORITY_HEADER];
  const tenantText = headers[TENANT_HEADER];
  if (priorityText === undefined && tenantText === undefined) {
    if (lastDefault.priority !== defaultPriority) lastDefault = Object.freeze({ priority: defaultPriority, tenant: '' });
    return lastDefault;
  }
  let priority = defaultPriority;
  if (priorityText !== undefined) {
    // node joins a repeated custom header with ", ", which no single integer parses as.
    const parsed = parsePriority(String(priorityText));
    if (typeof parsed !== 'number') return new CallError('invalid_request', `invalid ${PRIORITY_HEADER} metadata: ${parsed.problem}`);
    priority = parsed;
  }
  let tenant = '';
  if (tenantText !== undefined) {
    const checked = checkTenant(String(tenantText));
    if (typeof checked !== 'string') return new CallError('invalid_request', `invalid ${TENANT_HEADER} metadata: ${checked.problem}`);
    tenant = checked;
  }
  return { priority, tenant };
}
