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
 * A Trailers-Only response: one HEADERS frame with END_STREAM carrying :status 200 and the
 * gRPC status, as grpc-js's `_respondWithError` does. Returns false if the stream can no longer
 * take headers (already answered or gone).
 */
export function respondTrailersOnly(stream: ServerHttp2Stream, status: GrpcStatus, message: string, extra?: OutgoingHttpHeaders): boolean {
  if (stream.headersSent || stream.destroyed || stream.closed) return false;
  stream.respond(
    {
      [HTTP2_HEADER_STATUS]: 200,
      [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
      ...statusTrailers(status, message, extra),
    },
    { endStream: true },
  );
  // Discard whatever request body is still coming; the answer is already given.
  stream.resume();
  return true;
}
