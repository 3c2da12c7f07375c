/**
 * Reads a call's first request message before admission, for --ttft-slo-ms: admission by work
 * needs the prompt's length and max_tokens, which travel in the body, not in the headers. The
 * bytes read are put back (unshift), so the call forwards them untouched like any other.
 *
 * Bounded: a message longer than `maxBytes`, a compressed one, or one that has not arrived
 * within `timeoutMs` ends the peek with no message (the call then counts at a conservative size);
 * a body that ends before one whole message ends it with `truncated` (nothing can be put back
 * after the end of a stream, and the engine could not serve it either); a client that resets or
 * closes first ends it with `gone`. A stream in the peek holds no slot and no place in the queue.
 */
import { constants } from 'node:http2';
import type { CallClock } from './call-context.js';

const FRAME_HEADER_BYTES = 5;
const { NGHTTP2_CANCEL } = constants;

/** The parts of node's ServerHttp2Stream the peek uses. */
export interface PeekableStream {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end' | 'close' | 'aborted', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  off(event: 'data', listener: (chunk: Buffer) => void): unknown;
  off(event: 'end' | 'close' | 'aborted', listener: () => void): unknown;
  off(event: 'error', listener: (err: Error) => void): unknown;
  pause(): unknown;
  unshift(chunk: Buffer): void;
  close(code?: number): void;
  readonly destroyed: boolean;
}

export interface PeekOutcome {
  /** The first message's payload (uncompressed), or undefined when it could not be had within the bounds. */
  message(payload: Uint8Array | undefined): void;
  /** The request body ended before one whole message. */
  truncated(): void;
  /** The client went away first. */
  gone(): void;
}

export function peekFirstMessage(stream: PeekableStream, maxBytes: number, timeoutMs: number, clock: CallClock, outcome: PeekOutcome): void {
  const chunks: Buffer[] = [];
  let bytes = 0;
  let settled = false;

  const finish = (payload: Uint8Array | undefined, end: 'message' | 'truncated' | 'gone'): void => {
    if (settled) return;
    settled = true;
    clock.clearTimer(timer);
    stream.off('data', onData);
    stream.off('end', onEnd);
    stream.off('close', onGone);
    stream.off('aborted', onGone);
    stream.off('error', onError);
    if (end !== 'message') return end === 'gone' ? outcome.gone() : outcome.truncated();
    stream.pause();
    if (bytes > 0) stream.unshift(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes));
    outcome.message(payload);
  };
  let length: number | undefined; // the message's, once its frame header is in
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    bytes += chunk.length;
    if (length === undefined) {
      if (bytes < FRAME_HEADER_BYTES) return;
      const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
      if (head[0] !== 0) return finish(undefined, 'message'); // compressed: not ours to inflate
      length = head.readUInt32BE(1);
      if (length > maxBytes) return finish(undefined, 'message');
    }
    if (bytes < FRAME_HEADER_BYTES + length) return;
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
    finish(all.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length), 'message');
  };
  const onEnd = (): void => finish(undefined, 'truncated');
  const onGone = (): void => finish(undefined, 'gone');
  const onError = (): void => finish(undefined, 'gone');
  const timer = clock.setTimer(() => finish(undefined, 'message'), timeoutMs);

  if (stream.destroyed) return finish(undefined, 'gone');
  stream.on('data', onData);
  stream.on('end', onEnd);
  stream.on('close', onGone);
  stream.on('aborted', onGone);
  stream.on('error', onError);
}

/** A stream whose client went away during the peek: nothing else will close it. */
export function closeGoneStream(stream: PeekableStream): void {
  if (!stream.destroyed) stream.close(NGHTTP2_CANCEL);
}
