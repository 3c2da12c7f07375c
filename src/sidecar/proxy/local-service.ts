/**
 * A gRPC service the sidecar answers itself on the ingress port (grpc.health.v1.Health,
 * dynamo.sidecar.v1.WorkerLoad): the ingress hands it matching streams before anything else, so
 * these calls never take an admission slot, never reach the engine, are not counted as proxied
 * calls, and are answered while draining too.
 */
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';

export interface LocalService {
  /** True for the paths this service answers. */
  handles(path: string | undefined): boolean;
  serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void;
  /** At shutdown: end long-lived streams (watches) so client connections can close. */
  close?(): void;
}
