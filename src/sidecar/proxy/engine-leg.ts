/**
 * The engine's side of one dispatched call: opening its stream, what the engine has said on it,
 * and how our side of it ends. Once the engine has answered in full (trailers, or Trailers-Only)
 * our request side is ended gracefully and never reset: a RST_STREAM per finished call would
 * count against the engine's own Rapid Reset limit (node's server sends
 * GOAWAY(ENHANCE_YOUR_CALM)) and drop the session every call shares.
 */
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { Logger } from '../../platform/log.js';
import { CallError } from './call-error.js';
import type { UpstreamConnector, UpstreamStream } from './call-context.js';
import { CALL, type CallEvents, type WithCall } from './call-listeners.js';
import { ENGINE_UNAVAILABLE_MESSAGE, engineOutcome, type EngineOutcome } from './engine-outcome.js';
import { isHeaderError, type RawHeaders } from './request-headers.js';
import { guardedEnd, guardedReset, guardedWrite, type StreamFaultSink } from './stream-guard.js';

const { NGHTTP2_CANCEL } = constants;

/** A stream to the engine for `call`, or why there is none (the caller answers the client with it). */
export function openEngineLeg(
  connector: UpstreamConnector,
  headers: OutgoingHttpHeaders | RawHeaders,
  call: CallEvents,
  logger: Logger,
): EngineLeg | CallError {
  if (connector.down) return new CallError('upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE);
  try {
    return new EngineLeg(connector.request(headers), call);
  } catch (err) {
    // Headers node will not send belong to the one call, never to the engine session.
    if (isHeaderError(err)) return new CallError('invalid_request', `request headers cannot be forwarded: ${(err as Error).message}`);
    logger.debug('call not dispatched: engine stream could not be opened', { error: (err as Error).message });
    return new CallError('upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE, { cause: err });
  }
}

export class EngineLeg {
  readonly stream: WithCall<UpstreamStream>;
  /** The engine's trailers, once they came. */
  trailers: IncomingHttpHeaders | undefined;
  /** Kept from the start: by the time the stream closes, node may have let go of its session. */
  private readonly session: unknown;
  private error: Error | undefined;
  private answeredInFull = false;

  constructor(stream: UpstreamStream, call: CallEvents) {
    this.stream = stream as WithCall<UpstreamStream>;
    this.stream[CALL] = call;
    this.session = stream.session;
  }

  /** The stream's first 'error' (always followed by 'close'): tells a lost session from a reset. */
  noteError(err: Error): void {
    this.error ??= err;
  }

  /** False when the engine's flow-control window is full (pause the client until 'drain'). */
  write(chunk: Buffer, sink: StreamFaultSink): boolean {
    return guardedWrite(this.stream, chunk, sink);
  }

  /** Ends our request side (the client finished sending). */
  end(sink: StreamFaultSink): void {
    guardedEnd(this.stream, sink);
  }

  /** The engine has answered in full: our request side ends gracefully, and is never reset. */
  answered(sink: StreamFaultSink): void {
    this.answeredInFull = true;
    this.end(sink);
  }

  /** Cancels the engine's work unless it answered in full; a failure here has nothing left to end. */
  cancel(): void {
    if (!this.answeredInFull) guardedReset(this.stream, NGHTTP2_CANCEL, IGNORE_FAULT);
  }

  /** How the stream ended without trailers: a lost connection, or the engine's own reset. */
  outcome(connector: Pick<UpstreamConnector, 'wasConnected'>): EngineOutcome {
    return engineOutcome({ error: this.error, session: this.session, rstCode: this.stream.rstCode }, connector);
  }
}

const IGNORE_FAULT: StreamFaultSink = { onStreamFault() {} };
