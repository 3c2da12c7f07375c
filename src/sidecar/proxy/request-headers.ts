/**
 * Request headers on their way to the engine. HTTP/2 forbids connection-specific header fields
 * (RFC 9113 section 8.2.2), and node's client refuses to send them (it throws), so a client that
 * sends one must not reach `session.request()` with it: the header is dropped, and `te` is
 * normalised to the one value HTTP/2 allows. Node's server accepts these from clients, so
 * without this step one request could break the call or the shared engine session.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { MAX_FORWARDED_TIMEOUT_MS, formatGrpcTimeout } from '../../protocol/grpc/deadline.js';

/** Hop-by-hop fields that HTTP/2 does not carry; dropped before forwarding. */
const CONNECTION_SPECIFIC_HEADERS = Object.freeze(['connection', 'http2-settings', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);
const CONNECTION_SPECIFIC = new Set<string>(CONNECTION_SPECIFIC_HEADERS);

/** A flat `[name, value, name, value, ...]` list, as node's 'stream' event gives it (rawHeaders). */
export type RawHeaders = string[];

/**
 * Whether `session.request()` of this Node takes a raw header list (Node 22.17 and 24.0 on).
 * Handing it the list the client's HEADERS arrived as skips building node's header list from
 * an object: 6-7% of a unary call's CPU on Node 24 (docs/data-plane.md). Older Nodes would
 * read an array as an object with keys "0", "1", ...: they get the object.
 */
export function rawRequestHeadersSupported(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major >= 24 || (major === 22 && minor >= 17);
}

export const RAW_REQUEST_HEADERS = rawRequestHeadersSupported(process.versions.node);

/**
 * The headers a call is sent to the engine with: the client's, made forwardable, with the time
 * left of the call's deadline as `grpc-timeout` (undefined `timeLeftMs`: the client sent none).
 * The raw list when node takes one (RAW_REQUEST_HEADERS), else the object.
 */
export function upstreamRequestHeaders(
  headers: IncomingHttpHeaders,
  raw: RawHeaders | undefined,
  timeLeftMs: number | undefined,
): OutgoingHttpHeaders | RawHeaders {
  const timeout = timeLeftMs === undefined ? undefined : formatGrpcTimeout(Math.min(MAX_FORWARDED_TIMEOUT_MS, timeLeftMs));
  if (raw) return forwardableRawHeaders(raw, timeout);
  const forwarded: OutgoingHttpHeaders = stripConnectionHeaders(headers);
  if (timeout !== undefined) forwarded['grpc-timeout'] = timeout;
  return forwarded;
}

/**
 * The raw form of stripConnectionHeaders, plus the forwarded `grpc-timeout` (undefined: the
 * client sent none). Returns `raw` itself, changed in place, unless a field has to go; the list
 * is the call's own (node builds one per stream), so nothing else sees the change.
 */
export function forwardableRawHeaders(raw: RawHeaders, grpcTimeout: string | undefined): RawHeaders {
  let out: RawHeaders | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const sent = raw[i + 1]!;
    let value: string | undefined = sent;
    if (CONNECTION_SPECIFIC.has(name)) value = undefined;
    else if (name === 'te' && sent !== 'trailers') value = sent.split(',').some((v) => v.trim().toLowerCase() === 'trailers') ? 'trailers' : undefined;
    else if (name === 'grpc-timeout' && grpcTimeout !== undefined) value = grpcTimeout;
    if (value === undefined) out ??= raw.slice(0, i);
    else if (out) out.push(name, value);
    else raw[i + 1] = value;
  }
  return out ?? raw;
}

/**
 * Makes `headers` forwardable in place and returns it. The common request (no such field, `te`
 * exactly "trailers") costs a few property reads and no copy.
 */
export function stripConnectionHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  for (const name of CONNECTION_SPECIFIC_HEADERS) {
    if (headers[name] !== undefined) delete headers[name];
  }
  const te = headers.te;
  if (te !== undefined && te !== 'trailers') {
    // The only TE value HTTP/2 allows is "trailers" (any case in HTTP/1 habits); anything else is dropped.
    const values = (Array.isArray(te) ? te.join(',') : te).split(',').map((v) => v.trim().toLowerCase());
    if (values.includes('trailers')) headers.te = 'trailers';
    else delete headers.te;
  }
  return headers;
}

/**
 * Node error codes that `session.request()` throws for headers it will not send. Such a
 * failure belongs to the one call (INVALID_ARGUMENT), never to the engine session.
 */
const HEADER_ERROR_CODES = new Set([
  'ERR_HTTP2_INVALID_CONNECTION_HEADERS',
  'ERR_HTTP2_INVALID_HEADER_VALUE',
  'ERR_HTTP2_INVALID_PSEUDOHEADER',
  'ERR_HTTP2_HEADER_SINGLE_VALUE',
  'ERR_INVALID_HTTP_TOKEN',
  'ERR_INVALID_CHAR',
  'ERR_INVALID_ARG_TYPE',
  'ERR_INVALID_ARG_VALUE',
]);

export function isHeaderError(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && HEADER_ERROR_CODES.has(code);
}
