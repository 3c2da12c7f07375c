/**
 * grpc.health.v1.Health answered by the sidecar itself on the ingress port, so probes never take
 * an admission slot and never reach the engine. Every service name gets the sidecar's state:
 * SERVING while the engine is reachable and the sidecar is not draining, else NOT_SERVING.
 * Check and Watch are served; List is left to fall through to the engine like any other method.
 */
import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { join } from 'node:path';
import { frameMessage, readSingleMessage } from '../../protocol/grpc/framing.js';
import { respondTrailersOnly, statusTrailers, trailersOnlyHeaders } from '../../protocol/grpc/respond.js';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import { PROTO_DIR } from '../../protocol/proto-path.js';

export const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';
export const HEALTH_WATCH_PATH = '/grpc.health.v1.Health/Watch';

const MAX_REQUEST_BYTES = 64 * 1024;
const { HTTP2_HEADER_STATUS, HTTP2_HEADER_CONTENT_TYPE } = constants;

/** Where the health answer comes from; the sidecar composes it from upstream and drain state. */
export interface ServingState {
  serving(): boolean;
  onChange(listener: () => void): () => void;
}

export class HealthService {
  private readonly servingFrame: Buffer;
  private readonly notServingFrame: Buffer;

  constructor(private readonly state: ServingState) {
    const definition = loadSync(join(PROTO_DIR, 'grpc/health/v1/health.proto'), { enums: String });
    const response = definition['grpc.health.v1.HealthCheckResponse'] as MessageTypeDefinition<{ status: string }, { status: string }>;
    const encode = (status: string): Buffer => frameMessage(response.serialize({ status }));
    this.servingFrame = encode('SERVING');
    this.notServingFrame = encode('NOT_SERVING');
  }

  /** True when the call was one of ours and has been answered. */
  handles(path: string | undefined): boolean {
    return path === HEALTH_CHECK_PATH || path === HEALTH_WATCH_PATH;
  }

  serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => {});
    readSingleMessage(stream, MAX_REQUEST_BYTES).then(
      () => (headers[':path'] === HEALTH_WATCH_PATH ? this.watch(stream) : this.check(stream)),
      (err: Error) => respondTrailersOnly(stream, trailersOnlyHeaders(GrpcStatus.INVALID_ARGUMENT, `health request: ${err.message}`)),
    );
  }

  private frame(): Buffer {
    return this.state.serving() ? this.servingFrame : this.notServingFrame;
  }

  private check(stream: ServerHttp2Stream): void {
    if (stream.destroyed) return;
    stream.respond({ [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc' }, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(statusTrailers(GrpcStatus.OK, '')));
    stream.end(this.frame());
  }

  private watch(stream: ServerHttp2Stream): void {
    if (stream.destroyed) return;
    stream.respond({ [HTTP2_HEADER_STATUS]: 200, [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc' });
    let last = this.frame();
    stream.write(last);
    const unsubscribe = this.state.onChange(() => {
      const next = this.frame();
      if (next !== last && !stream.destroyed) stream.write((last = next));
    });
    stream.on('close', unsubscribe);
  }
}
