/**
 * The TLS metrics of one process, by endpoint: reload and handshake-failure counters that exist
 * at 0 from registration (so rates and increase() are never empty), and the expiry gauge of the
 * certificate presented now, in whole seconds, gone when the endpoint presents none.
 */
import type { X509Certificate } from 'node:crypto';
import { Registry } from 'prom-client';
import { beforeEach, describe, expect, it } from 'vitest';
import { TlsMetrics } from '../../../../src/platform/tls/tls-metrics.js';

/** What the metrics read of a certificate: its notAfter. */
const leafUntil = (validTo: string) => ({ validTo }) as X509Certificate;

let registry: Registry;
let metrics: TlsMetrics;

beforeEach(() => {
  registry = new Registry();
  metrics = new TlsMetrics(registry, 'dynamo_sidecar');
});

async function values(name: string): Promise<{ labels: Record<string, string | number>; value: number }[]> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  return (await metric.get()).values.map((v) => ({ labels: { ...v.labels } as Record<string, string | number>, value: v.value }));
}

describe('TlsMetrics', () => {
  it('registers three series families under the prefix: two counters and a gauge', async () => {
    const text = await registry.metrics();
    expect(text).toContain('# TYPE dynamo_sidecar_tls_reloads_total counter');
    expect(text).toContain('# TYPE dynamo_sidecar_tls_handshake_failures_total counter');
    expect(text).toContain('# TYPE dynamo_sidecar_tls_cert_expiry_timestamp_seconds gauge');
    const frontend = new Registry();
    new TlsMetrics(frontend, 'dynamo_frontend');
    expect(await frontend.metrics()).toContain('dynamo_frontend_tls_reloads_total');
  });

  it("makes an endpoint's counters exist at 0 once registered, and no expiry until it presents a certificate", async () => {
    metrics.register('ingress');
    expect(await values('dynamo_sidecar_tls_reloads_total')).toEqual([
      { labels: { listener: 'ingress', result: 'ok' }, value: 0 },
      { labels: { listener: 'ingress', result: 'error' }, value: 0 },
    ]);
    expect(await values('dynamo_sidecar_tls_handshake_failures_total')).toEqual([{ labels: { listener: 'ingress' }, value: 0 }]);
    expect(await values('dynamo_sidecar_tls_cert_expiry_timestamp_seconds')).toEqual([]);
  });

  it('registering again keeps the counts', async () => {
    metrics.register('ingress');
    metrics.reloaded('ingress', 'ok');
    metrics.handshakeFailed('ingress');
    metrics.register('ingress');
    expect((await values('dynamo_sidecar_tls_reloads_total')).find((v) => v.labels['result'] === 'ok')?.value).toBe(1);
    expect((await values('dynamo_sidecar_tls_handshake_failures_total'))[0]?.value).toBe(1);
  });

  it('counts reloads by result and handshake failures, each endpoint apart', async () => {
    metrics.register('ingress');
    metrics.register('upstream-client');
    metrics.reloaded('ingress', 'ok');
    metrics.reloaded('ingress', 'error');
    metrics.reloaded('ingress', 'error');
    metrics.handshakeFailed('upstream-client');
    metrics.handshakeFailed('upstream-client');
    metrics.handshakeFailed('upstream-client');
    const reloads = await values('dynamo_sidecar_tls_reloads_total');
    const count = (listener: string, result: string) => reloads.find((v) => v.labels['listener'] === listener && v.labels['result'] === result)?.value;
    expect([count('ingress', 'ok'), count('ingress', 'error'), count('upstream-client', 'ok'), count('upstream-client', 'error')]).toEqual([1, 2, 0, 0]);
    expect(await values('dynamo_sidecar_tls_handshake_failures_total')).toEqual([
      { labels: { listener: 'ingress' }, value: 0 },
      { labels: { listener: 'upstream-client' }, value: 3 },
    ]);
  });

  it("sets the expiry to the certificate's notAfter in seconds since the epoch, rounded down", async () => {
    metrics.presenting('ingress', leafUntil('Jun  1 12:00:00 2030 GMT'));
    metrics.presenting('system', leafUntil('2031-01-01T00:00:00.999Z'));
    expect(await values('dynamo_sidecar_tls_cert_expiry_timestamp_seconds')).toEqual([
      { labels: { listener: 'ingress' }, value: Date.UTC(2030, 5, 1, 12) / 1000 },
      { labels: { listener: 'system' }, value: Date.UTC(2031, 0, 1) / 1000 },
    ]);
  });

  it('moves the expiry with a rotation, and drops it when the endpoint presents no certificate', async () => {
    metrics.presenting('upstream-client', leafUntil('Jan  1 00:00:00 2030 GMT'));
    metrics.presenting('upstream-client', leafUntil('Jan  1 00:00:00 2031 GMT'));
    expect(await values('dynamo_sidecar_tls_cert_expiry_timestamp_seconds')).toEqual([
      { labels: { listener: 'upstream-client' }, value: Date.UTC(2031, 0, 1) / 1000 },
    ]);
    metrics.presenting('ingress', leafUntil('Jan  1 00:00:00 2030 GMT'));
    metrics.presenting('upstream-client', undefined);
    expect(await values('dynamo_sidecar_tls_cert_expiry_timestamp_seconds')).toEqual([{ labels: { listener: 'ingress' }, value: Date.UTC(2030, 0, 1) / 1000 }]);
  });
});
