/**
 * The one guard every write to a proxied call's streams goes through. Node throws when a stream
 * is written after it closed (ERR_HTTP2_INVALID_STREAM), answered twice (ERR_HTTP2_HEADERS_SENT)
 * and so on; a throw inside a stream event would take the whole process down. Each operation
 * here checks the stream's state first and skips what can no longer be done; if node throws all
 * the same, the call is told (`onStreamFault`) and ends, the process goes on.
 */
import type { OutgoingHttpHeaders } from 'node:http2';
import type { DownstreamStream, UpstreamStream } from './call-context.js';

type CallStream = DownstreamStream | UpstreamStream;

/** The call that owns the stream: it ends itself with INTERNAL when an operation throws. */
export interface StreamFaultSink {
  onStreamFault(operation: string, err: unknown): void;
}

export type RespondOptions = { readonly endStream: true } | { readonly waitForTrailers: true };

export function isWritable(stream: CallStream): boolean {
  return !stream.destroyed && !stream.closed && !stream.writableEnded;
}

/** Sends response headers; false when they cannot be sent any more (already sent, or the stream is gone). */
export function guardedRespond(down: DownstreamStream, headers: OutgoingHttpHeaders, options: RespondOptions, sink: StreamFaultSink): boolean {
  if (down.headersSent || !isWritable(down)) return false;
  try {
    down.respond(headers, options);
    return true;
  } catch (err) {
    sink.onStreamFault('respond', err);
    return false;
  }
}

/** Writes a chunk; false only when the peer's flow-control window is full (pause the source until 'drain'). */
export function guardedWrite(stream: CallStream, chunk: Buffer, sink: StreamFaultSink): boolean {
  if (!isWritable(stream)) return true;
  try {
    return stream.write(chunk);
  } catch (err) {
    sink.onStreamFault('write', err);
    return true;
  }
}

/** Ends our side of the stream; false when it was no longer open. */
export function guardedEnd(stream: CallStream, sink: StreamFaultSink): boolean {
  if (!isWritable(stream)) return false;
  try {
    stream.end();
    return true;
  } catch (err) {
    sink.onStreamFault('end', err);
    return false;
  }
}

export function guardedTrailers(down: DownstreamStream, trailers: OutgoingHttpHeaders, sink: StreamFaultSink): void {
  if (down.destroyed || down.closed) return;
  try {
    down.sendTrailers(trailers);
  } catch (err) {
    sink.onStreamFault('send trailers', err);
  }
}

/** RST_STREAM with `code`, unless the stream is closed already. */
export function guardedReset(stream: CallStream, code: number, sink: StreamFaultSink): void {
  if (stream.destroyed || stream.closed) return;
  try {
    stream.close(code);
  } catch (err) {
    sink.onStreamFault('reset', err);
  }
}

/** Destroys the client's stream (a reset to the client) unless it is gone already. */
export function destroyStream(down: DownstreamStream): void {
  if (!down.destroyed) down.destroy();
}
