/**
 * What every proxied call shares: the admission gate, the engine connection, metrics, and the
 * optional observer that load accounting hooks into. Built once by the ingress.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { AdmissionGate } from '../admission/gate.js';
import type { SidecarMetrics } from '../metrics/sidecar-metrics.js';
import type { UpstreamPool } from './upstream.js';

/** Sees the raw bytes of one dispatched call; must be cheap and must not throw. */
export interface TrafficTap {
  request(chunk: Buffer): void;
  response(chunk: Buffer): void;
  /** Exactly once, when the call ends for any reason. */
  end(): void;
}

export interface CallObserver {
  /** A call was refused with RESOURCE_EXHAUSTED. */
  rejected(): void;
  /** A call got an engine slot; return a tap to watch its bytes, or undefined (the common case). */
  dispatched(headers: IncomingHttpHeaders): TrafficTap | undefined;
}

export interface CallContext {
  readonly gate: AdmissionGate;
  readonly upstream: UpstreamPool;
  readonly metrics: SidecarMetrics;
  /** The whole RESOURCE_EXHAUSTED answer, built once (see overloadResponse). */
  readonly rejectionResponse: OutgoingHttpHeaders;
  /** Monotonic milliseconds (performance.now in production, a fake in tests). */
  readonly now: () => number;
  readonly observer?: CallObserver;
}
