/**
 * How the engine's part of a call ended when it ended without trailers, and the one table that
 * maps an engine reset to the status the call is counted under. Beside call-error.ts, which maps
 * the sidecar's own reasons: between them they are every status a proxied call can end with that
 * the engine did not send itself.
 */
import { constants } from 'node:http2';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import { CallError } from './call-error.js';
import type { UpstreamConnector } from './call-context.js';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM } = constants;

/** What clients are told when the engine cannot be used; the engine's address goes to the logs only. */
export const ENGINE_UNAVAILABLE_MESSAGE = 'engine unavailable';
export const ENGINE_LOST_MESSAGE = 'engine connection lost during the call';

/**
 * The status a reset from the engine is recorded as. The reset itself is passed on to the client
 * unchanged (a direct caller would see the same), so this is only the outcome in the metrics:
 * CANCEL is the engine giving the call up, REFUSED_STREAM is "never processed, retry", any other
 * code is an error inside the engine.
 */
const STATUS_OF_ENGINE_RESET: Readonly<Record<number, GrpcStatus>> = {
  [NGHTTP2_CANCEL]: GrpcStatus.CANCELLED,
  [NGHTTP2_REFUSED_STREAM]: GrpcStatus.UNAVAILABLE,
};

export function statusOfEngineReset(code: number): GrpcStatus {
  return STATUS_OF_ENGINE_RESET[code] ?? GrpcStatus.INTERNAL;
}

/** The engine's stream closed without trailers: what is left of it to judge by. */
export interface EngineStreamEnd {
  /** The stream's 'error', if one came. */
  readonly error: Error | undefined;
  /** The engine session the stream belonged to. */
  readonly session: unknown;
  /** The RST_STREAM code, if the stream was reset. */
  readonly rstCode: number | undefined;
}

export type EngineOutcome =
  /** The connection failed: the sidecar answers the call itself. */
  | { readonly kind: 'failed'; readonly error: CallError; readonly metric: 'connect' | 'session_lost' }
  /** The engine reset the stream on a live connection: the same reset goes to the client. */
  | { readonly kind: 'reset'; readonly code: number; readonly status: GrpcStatus };

export function engineOutcome(end: EngineStreamEnd, connector: Pick<UpstreamConnector, 'wasConnected'>): EngineOutcome {
  const session = end.session as { destroyed?: boolean; closed?: boolean } | undefined;
  // A reset with an error code also arrives as the stream's ERR_HTTP2_STREAM_ERROR: that is the
  // engine's answer on a live connection, not a lost one.
  const engineReset = (end.error as { code?: unknown } | undefined)?.code === 'ERR_HTTP2_STREAM_ERROR';
  if ((end.error && !engineReset) || !session || session.destroyed || session.closed) {
    const cause = { cause: end.error };
    return connector.wasConnected(session)
      ? { kind: 'failed', metric: 'session_lost', error: new CallError('upstream_lost', ENGINE_LOST_MESSAGE, cause) }
      : { kind: 'failed', metric: 'connect', error: new CallError('upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE, cause) };
  }
  // Node reports a reset that came after our request side ended as code 0.
  const code = end.rstCode ?? NGHTTP2_NO_ERROR;
  return { kind: 'reset', code, status: statusOfEngineReset(code) };
}
