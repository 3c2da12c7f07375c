/**
 * gRPC length-prefixed messages: 1 byte compressed flag, 4 bytes big-endian length, payload.
 * Only the sidecar's own small services use this; proxied calls are forwarded as raw bytes.
 */
import type { Readable } from 'node:stream';

/**
 * The largest message a gRPC server accepts unless configured otherwise (grpc core's and
 * grpc-js's `grpc.max_receive_message_length` default, 4 MiB): what an engine's Generate server
 * takes. Larger ones fail with RESOURCE_EXHAUSTED "Received message larger than max".
 */
export const GRPC_DEFAULT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024;

export function frameMessage(payload: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(5 + payload.length);
  framed.writeUInt8(0, 0);
  framed.writeUInt32BE(payload.length, 1);
  framed.set(payload, 5);
  return framed;
}

export class FramingError extends Error {
  override readonly name = 'FramingError';
}

/** Reads a whole request body (capped) and returns the first message's payload. */
export async function readSingleMessage(body: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new FramingError(`request body larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const all = Buffer.concat(chunks, size);
  if (all.length === 0) return all; // an empty body is an empty message for our own services
  if (all.length < 5) throw new FramingError('truncated gRPC message prefix');
  if (all[0] !== 0) throw new FramingError('compressed messages are not supported by the sidecar health service');
  const length = all.readUInt32BE(1);
  if (all.length < 5 + length) throw new FramingError('truncated gRPC message');
  return all.subarray(5, 5 + length);
}
