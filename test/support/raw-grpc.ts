/**
 * A gRPC request on a bare node:http2 session, for tests that need to control the wire: send
 * headers a grpc-js client would not (or not send its own deadline handling), read the raw
 * response frames, or stop reading.
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';

export const TEST_ENGINE_PATH = '/dynamo.sidecar.testing.TestEngine';

export interface RawCall {
  readonly session: ClientHttp2Session;
  readonly stream: ClientHttp2Stream;
}

/**
 * Opens `path` on `address` with gRPC's content-type and `te: trailers` (overridable by
 * `headers`). With `body`, sends it framed as one message and ends the request side.
 */
export function rawCall(address: string, path: string, headers: OutgoingHttpHeaders = {}, body?: Uint8Array): RawCall {
  const session = connect(`http://${address}`);
  session.on('error', () => {});
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  stream.on('error', () => {});
  if (body) stream.end(frameMessage(body));
  return { session, stream };
}
