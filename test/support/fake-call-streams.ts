/**
 * Fake HTTP/2 streams and a fake engine connection for ProxiedCall unit tests. They are strict
 * where node is dangerous: an operation node would throw on (respond twice, respond or write on a
 * closed stream, trailers when none are awaited) throws here too, and close() emits 'aborted'
 * synchronously when the writable side was open, as node does, so re-entrant events are exercised.
 * Every operation that sends something is recorded in `ops`.
 */
import { EventEmitter } from 'node:events';
import { constants, type OutgoingHttpHeaders } from 'node:http2';
import type { CallClock, UpstreamConnector } from '../../src/sidecar/proxy/call-context.js';
import { FakeTimers } from './fake-timers.js';

class StreamOpError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

abstract class FakeStream extends EventEmitter {
  destroyed = false;
  closed = false;
  writableEnded = false;
  rstCode: number | undefined;
  /** What write() returns: false simulates a full flow-control window. */
  writeReturns = true;
  readonly ops: string[] = [];

  protected assertOpen(op: string): void {
    if (this.destroyed || this.closed) throw new StreamOpError('ERR_HTTP2_INVALID_STREAM', `${op} on a closed stream`);
  }

  write(chunk: Buffer): boolean {
    this.assertOpen('write');
    if (this.writableEnded) throw new StreamOpError('ERR_STREAM_WRITE_AFTER_END', 'write after end');
    this.ops.push(`write ${chunk.length}`);
    return this.writeReturns;
  }

  end(): this {
    this.assertOpen('end');
    if (this.writableEnded) throw new StreamOpError('ERR_STREAM_ALREADY_FINISHED', 'end twice');
    this.writableEnded = true;
    this.ops.push('end');
    return this;
  }

  close(code: number = constants.NGHTTP2_NO_ERROR): void {
    if (this.closed || this.destroyed) return;
    this.ops.push(`close ${code}`);
    this.closed = true;
    this.rstCode = code;
    if (!this.writableEnded) {
      this.writableEnded = true;
      this.emit('aborted'); // synchronously, as node's closeStream does
    }
  }

  /** The peer reset the stream: node marks it closed and emits 'aborted' if our side was open. */
  peerReset(code: number): void {
    if (this.closed || this.destroyed) return;
    this.closed = true;
    this.rstCode = code;
    if (!this.writableEnded) {
      this.writableEnded = true;
      this.emit('aborted');
    }
  }

  destroy(): this {
    if (!this.destroyed) this.ops.push('destroy');
    this.destroyed = true;
    return this;
  }

  pause(): this {
    return this;
  }

  resume(): this {
    return this;
  }
}

export class FakeDownstream extends FakeStream {
  headersSent = false;
  private awaitingTrailers = false;
  sentHeaders: OutgoingHttpHeaders | undefined;
  sentTrailers: OutgoingHttpHeaders | undefined;

  respond(headers?: OutgoingHttpHeaders, options?: { endStream?: boolean; waitForTrailers?: boolean }): void {
    if (this.headersSent) throw new StreamOpError('ERR_HTTP2_HEADERS_SENT', 'response already sent');
    this.assertOpen('respond');
    this.headersSent = true;
    this.sentHeaders = headers;
    this.awaitingTrailers = options?.waitForTrailers === true;
    if (options?.endStream) this.writableEnded = true;
    this.ops.push(options?.endStream ? `respond end-stream ${String(headers?.['grpc-status'])}` : 'respond');
  }

  sendTrailers(trailers: OutgoingHttpHeaders): void {
    this.assertOpen('sendTrailers');
    if (!this.awaitingTrailers) throw new StreamOpError('ERR_HTTP2_TRAILERS_NOT_READY', 'trailers not awaited');
    this.awaitingTrailers = false;
    this.sentTrailers = trailers;
    this.ops.push(`trailers ${String(trailers['grpc-status'])}`);
  }

  /** The client's answer as it would read it: Trailers-Only status, trailers status, or reset. */
  get outcome(): string | undefined {
    if (this.sentTrailers) return `status ${String(this.sentTrailers['grpc-status'])}`;
    if (this.sentHeaders && this.writableEnded && this.ops.some((op) => op.startsWith('respond end-stream')))
      return `status ${String(this.sentHeaders['grpc-status'])}`;
    if (this.rstCode !== undefined && this.ops.some((op) => op.startsWith('close'))) return `reset ${this.rstCode}`;
    return undefined;
  }
}

export class FakeSession {
  destroyed = false;
  closed = false;
}

export class FakeUpstream extends FakeStream {
  constructor(
    readonly session: FakeSession,
    readonly headers: OutgoingHttpHeaders,
  ) {
    super();
  }
}

/** The engine connection: opens FakeUpstreams, or throws what `failNext` says. */
export class FakeConnector implements UpstreamConnector {
  readonly opened: FakeUpstream[] = [];
  session = new FakeSession();
  connected = true;
  down = false;
  failNext: Error | undefined;

  request(headers: OutgoingHttpHeaders): FakeUpstream {
    const failure = this.failNext;
    if (failure) {
      this.failNext = undefined;
      throw failure;
    }
    const stream = new FakeUpstream(this.session, { ...headers });
    this.opened.push(stream);
    return stream;
  }

  wasConnected(): boolean {
    return this.connected;
  }
}

export function errorWithCode(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

/** A CallClock over FakeTimers: time moves only when the test advances it. */
export function fakeClock(timers = new FakeTimers()): CallClock & { timers: FakeTimers } {
  return {
    timers,
    now: () => timers.now,
    setTimer: (callback, ms) => timers.set(callback, ms),
    clearTimer: (handle) => timers.clear(handle),
  };
}
