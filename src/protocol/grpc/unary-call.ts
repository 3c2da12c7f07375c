/**
 * One unary gRPC call made by the sidecar itself on a raw HTTP/2 stream, for the few things it
 * asks the engine on its own behalf (GetModelInfo). It goes over the engine connection the proxy
 * already has, outside the admission gate: it never takes a slot and is never counted as a
 * proxied call. The outcome is always a status, never a throw: a stream that cannot be opened,
 * a reset, a missing status or no answer within `timeoutMs` each become a status and a message.
 */
import { constants, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import { frameMessage, readSingleMessage } from './framing.js';
import { GrpcStatus, decodeGrpcMessage, parseStatus } from './status.js';

export interface UnaryOutcome {
  readonly status: GrpcStatus;
  readonly message: string;
  /** The response message's payload, when the call ended OK. */
  readonly body?: Buffer;
}

/** Opens a stream on the engine connection (UpstreamPool.request); may throw. */
export type OpenStream = (headers: OutgoingHttpHeaders) => ClientHttp2Stream;

export interface UnaryCallOptions {
  readonly timeoutMs: number;
  /** Responses larger than this fail with RESOURCE_EXHAUSTED. Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Abort cancels the stream (RST_STREAM CANCEL) and resolves CANCELLED. */
  readonly signal?: AbortSignal;
}

export async function unaryCall(open: OpenStream, path: string, request: Uint8Array, options: UnaryCallOptions): Promise<UnaryOutcome> {
  let stream: ClientHttp2Stream;
  try {
    stream = open({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': `${Math.max(1, Math.ceil(options.timeoutMs))}m`,
    });
  } catch (err) {
    return { status: GrpcStatus.UNAVAILABLE, message: `cannot open a stream: ${(err as Error).message}` };
  }
  stream.on('error', () => {}); // seen through the read below
  let grpcStatus: string | undefined;
  let grpcMessage = '';
  let httpStatus: number | undefined;
  const readStatus = (headers: Record<string, unknown>): void => {
    const status = headers['grpc-status'];
    if (typeof status !== 'string') return;
    grpcStatus = status;
    grpcMessage = typeof headers['grpc-message'] === 'string' ? decodeGrpcMessage(headers['grpc-message']) : '';
  };
  stream.on('response', (headers) => {
    httpStatus = headers[':status'];
    readStatus(headers); // Trailers-Only
  });
  stream.on('trailers', readStatus);

  let ended: 'timeout' | 'aborted' | undefined;
  const cancel = (why: 'timeout' | 'aborted'): void => {
    ended ??= why;
    if (!stream.destroyed && !stream.closed) stream.close(constants.NGHTTP2_CANCEL);
  };
  const timer = setTimeout(() => cancel('timeout'), options.timeoutMs);
  timer.unref();
  const onAbort = (): void => cancel('aborted');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) onAbort();
  stream.end(frameMessage(request));

  let body: Buffer | undefined;
  let readError: Error | undefined;
  try {
    body = await readSingleMessage(stream, options.maxResponseBytes ?? 1 << 20);
  } catch (err) {
    readError = err as Error;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }

  if (ended === 'timeout') return { status: GrpcStatus.DEADLINE_EXCEEDED, message: `no answer within ${options.timeoutMs} ms` };
  if (ended === 'aborted') return { status: GrpcStatus.CANCELLED, message: 'cancelled' };
  if (grpcStatus === undefined) {
    const reason =
      httpStatus !== undefined && httpStatus !== 200
        ? `HTTP ${String(httpStatus)} without a grpc-status (not a gRPC server?)`
        : (readError?.message ?? `stream ended without a grpc-status (RST_STREAM code ${stream.rstCode ?? 'none'})`);
    return { status: GrpcStatus.UNAVAILABLE, message: reason };
  }
  const status = parseStatus(grpcStatus);
  if (status !== GrpcStatus.OK) return { status, message: grpcMessage };
  // body is set exactly when the read did not throw.
  if (readError || body === undefined) return { status: GrpcStatus.INTERNAL, message: `bad response: ${readError?.message ?? 'no message'}` };
  return { status, message: grpcMessage, body };
}
