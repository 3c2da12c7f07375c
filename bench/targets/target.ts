/** What a scenario needs from a thing under test: where to send calls and which process to measure. */
import type { SidecarVariant } from '../scenarios/types.js';

export type TargetKind = 'direct' | 'sidecar' | 'haproxy' | 'nginx';

export interface Target {
  /** Row label in tables and JSON, e.g. "sidecar@node24.11.0". */
  readonly name: string;
  readonly kind: TargetKind;
  readonly port: number;
  /** Root pid of the proxy (nginx: its master); undefined for direct. */
  readonly pid: number | undefined;
  /** grpc-status counts from the proxy's own metrics (sidecar only). */
  grpcCodes?(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** Admission settings a proxy target is started with; undefined limit = admission off. */
export interface AdmissionSettings {
  readonly limit?: number;
  readonly queue?: number;
  /** HAProxy `timeout queue`, ms. */
  readonly queueTimeoutMs?: number;
}

/**
 * Admission on, never rejecting, as a proxy runs in production (the sidecar with its gate,
 * HAProxy with maxconn/maxqueue, nginx with limit_conn): the unary and streaming scenarios and
 * their profiles, so their CPU includes admission.
 */
export const NEVER_REJECT: AdmissionSettings = { limit: 10_000, queue: 16 };

export interface TargetSpec {
  readonly name: string;
  readonly kind: TargetKind;
  readonly admission?: AdmissionSettings;
  /** For kind sidecar: which Node binary and which build. */
  readonly sidecar?: SidecarVariant;
}
