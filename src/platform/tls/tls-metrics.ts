/**
 * TLS metrics of one process, by endpoint (`listener`: ingress, system, upstream-client, http,
 * admin, worker-client):
 *
 *   {prefix}_tls_reloads_total{listener,result="ok|error"}     certificate files that changed and were (not) taken
 *   {prefix}_tls_cert_expiry_timestamp_seconds{listener}       notAfter of the certificate presented now
 *   {prefix}_tls_handshake_failures_total{listener}            handshakes that failed (a listener's clients, a client's server)
 *
 * An alert on `expiry - time() < 7 * 86400` catches a rotation that stopped happening; one on
 * `increase(reloads_total{result="error"}[15m]) > 0` a rotation that writes something unusable.
 */
import type { X509Certificate } from 'node:crypto';
import { Counter, Gauge, type Registry } from 'prom-client';
import { expiresAt } from './pem-files.js';

export type ReloadResult = 'ok' | 'error';

export class TlsMetrics {
  private readonly reloads: Counter<'listener' | 'result'>;
  private readonly expiry: Gauge<'listener'>;
  private readonly handshakeFailures: Counter<'listener'>;

  /** `prefix`: dynamo_sidecar or dynamo_frontend. */
  constructor(registry: Registry, prefix: string) {
    const registers = [registry];
    this.reloads = new Counter({
      name: `${prefix}_tls_reloads_total`,
      help: 'TLS certificate files that changed on disk, by endpoint and whether the new files were taken (ok) or refused and the old ones kept (error).',
      labelNames: ['listener', 'result'],
      registers,
    });
    this.expiry = new Gauge({
      name: `${prefix}_tls_cert_expiry_timestamp_seconds`,
      help: 'Expiry (notAfter, seconds since the epoch) of the certificate each TLS endpoint presents now.',
      labelNames: ['listener'],
      registers,
    });
    this.handshakeFailures = new Counter({
      name: `${prefix}_tls_handshake_failures_total`,
      help: 'TLS handshakes that failed, by endpoint (a client without a valid certificate, an untrusted server, a name mismatch).',
      labelNames: ['listener'],
      registers,
    });
  }

  /** Makes the endpoint's series exist from the start (0), so a rate over them is never empty. */
  register(listener: string): void {
    this.reloads.inc({ listener, result: 'ok' }, 0);
    this.reloads.inc({ listener, result: 'error' }, 0);
    this.handshakeFailures.inc({ listener }, 0);
  }

  reloaded(listener: string, result: ReloadResult): void {
    this.reloads.inc({ listener, result });
  }

  presenting(listener: string, leaf: X509Certificate | undefined): void {
    if (leaf) this.expiry.set({ listener }, Math.floor(expiresAt(leaf) / 1000));
    else this.expiry.remove({ listener });
  }

  handshakeFailed(listener: string): void {
    this.handshakeFailures.inc({ listener });
  }
}
