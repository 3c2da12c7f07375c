/**
 * The sidecar's own gRPC answers on a raw node:http2 server stream.
 */
import { constants, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { encodeGrpcMessage, type GrpcStatus } from './status.js';

const { HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE } = constants;

export function statusTrailers(status: GrpcStatus, message: string, extra?: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const trailers: OutgoingHttpHeaders = { ...extra, 'grpc-status': String(status) };
  if (message) trailers['grpc-message'] = encodeGrpcMessage(message);
  return trailers;
}

/**
 * The headers of a Trailers-Only response: :status 200 and the gRPC status in one HEADERS
 * frame, as grpc-js's `_respondWithError` sends them. Build once where the answer is fixed
 * (the overload rejection); node copies the object on every respond().
 */
export function trailersOnlyHeaders(status: GrpcStatus, message: string, extra?: OutgoingHttpHeaders): OutgoingHttpHeaders {
  return { [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc', ...statusTrailers(status, message, extra) };
}

const END_STREAM = Object.freeze({ endStream: true });

/**
 * Sends a Trailers-Only response (END_STREAM on the HEADERS frame). Returns false if the
 * stream can no longer take headers (already answered or gone).
 */
export function respondTrailersOnly(stream: ServerHttp2Stream, headers: OutgoingHttpHeaders): boolean {
  if (stream.headersSent || stream.destroyed || stream.closed) return false;
  stream.respond(headers, END_STREAM);
  // Discard whatever request body is still coming; the answer is already given.
  stream.resume();
  return true;
}
