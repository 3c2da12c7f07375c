/**
 * The system port over HTTPS (--system-tls-cert): /ready, /live and /metrics (with the served
 * certificate's expiry) for a client trusting the CA, nothing for plain HTTP, the certificate
 * reloaded when its files rotate; and its connection timeouts still hold with TLS: a socket that
 * never starts the handshake, and one that completes it and sends no request, are closed after
 * the handshake timeout.
 */
import { X509Certificate } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/platform/log.js';
import { ServerTls } from '../../../../src/platform/tls/server-tls.js';
import { TlsMetrics } from '../../../../src/platform/tls/tls-metrics.js';
import { SystemServer } from '../../../../src/sidecar/system/system-server.js';
import { createTestPki, httpsGet, presentedCertificate, secretVolume, type TestPki } from '../../../support/certs.js';
import { runCleanups } from '../../../support/cleanups.js';
import { startSidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

let pki: TestPki;
const cleanups: (() => unknown)[] = [];

beforeAll(() => {
  pki = createTestPki();
  cleanups.push(() => pki.remove());
});

afterAll(() => runCleanups(cleanups));

const notAfterSeconds = (cert: Buffer): number => Math.floor(Date.parse(new X509Certificate(cert).validTo) / 1000);

describe('system port over HTTPS (the sidecar process)', () => {
  it('serves /ready, /live and /metrics over HTTPS only, and takes a rotated certificate', async () => {
    const engine = await startTestEngine();
    cleanups.push(() => engine.close());
    const volume = secretVolume(pki, 'system', pki.server);
    const sidecar = await startSidecarProcess([
      '--upstream',
      engine.address,
      '--engine-load-source',
      'traffic',
      '--system-tls-cert',
      volume.certFile,
      '--system-tls-key',
      volume.keyFile,
      '--tls-reload-interval-ms',
      '100',
    ]);
    cleanups.push(() => sidecar.stop('SIGKILL'));
    const base = `https://127.0.0.1:${sidecar.systemPort}`;
    const get = (path: string): Promise<{ status: number; body: string }> => httpsGet(base + path, { ca: pki.ca.cert });

    await waitFor(async () => (await get('/ready')).status === 200, '/ready over HTTPS');
    expect((await get('/live')).body).toContain('live');
    const metrics = (await get('/metrics')).body;
    expect(metrics).toContain(`dynamo_sidecar_tls_cert_expiry_timestamp_seconds{listener="system"} ${notAfterSeconds(pki.server.cert)}`);
    expect(metrics).toContain('dynamo_sidecar_tls_reloads_total{listener="system",result="ok"} 0');
    await expect(fetch(`http://127.0.0.1:${sidecar.systemPort}/ready`, { signal: AbortSignal.timeout(5000) })).rejects.toThrow();

    const next = pki.issue('system-next');
    volume.mount(next);
    await waitFor(
      async () => (await presentedCertificate(sidecar.systemPort, pki.ca.cert)).fingerprint256 === new X509Certificate(next.cert).fingerprint256,
      'the system port to present the rotated certificate',
    );
    expect((await get('/metrics')).body).toContain(`dynamo_sidecar_tls_cert_expiry_timestamp_seconds{listener="system"} ${notAfterSeconds(next.cert)}`);
  });
});

describe('system port timeouts with TLS (in process)', () => {
  const HANDSHAKE_MS = 300;
  let port: number;

  beforeAll(async () => {
    const tls = ServerTls.load({ certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: undefined }, 'system', {
      intervalMs: 0,
      logger: silentLogger,
      metrics: new TlsMetrics(new Registry(), 'test'),
    });
    const server = new SystemServer({
      registry: new Registry(),
      readiness: { notReadyReason: () => undefined },
      load: () => ({}),
      logger: silentLogger,
      metricsCacheMs: 0,
      handshakeTimeoutMs: HANDSHAKE_MS,
      tls,
    });
    cleanups.push(() => server.close());
    port = await server.listen('127.0.0.1', 0);
  });

  function closedAt(socket: Socket): () => number | undefined {
    let at: number | undefined;
    socket.on('error', () => {});
    socket.on('close', () => (at = Date.now()));
    cleanups.push(() => socket.destroy());
    return () => at;
  }

  it('closes a socket that never starts the TLS handshake', async () => {
    const socket = netConnect({ host: '127.0.0.1', port });
    const closed = closedAt(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
    const start = Date.now();
    await waitFor(() => closed() !== undefined, 'the silent socket to be closed', 5000);
    expect(closed()! - start).toBeGreaterThanOrEqual(HANDSHAKE_MS - 50);
  });

  it('keeps a keep-alive connection whose first request came in time, past the handshake timeout', async () => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: pki.ca.cert });
    const closed = closedAt(socket);
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    const request = 'GET /live HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n';
    socket.write(request);
    await waitFor(() => received.split('HTTP/1.1 200').length === 2, 'the first answer');
    // A deliberate pause: longer than the handshake timeout, which must not apply once a request came.
    await new Promise((resolve) => setTimeout(resolve, HANDSHAKE_MS * 2));
    expect(closed()).toBeUndefined();
    socket.write(request);
    await waitFor(() => received.split('HTTP/1.1 200').length === 3, 'the second answer on the same connection');
  });

  it('closes a connection that completes the handshake and sends no request', async () => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: pki.ca.cert });
    const closed = closedAt(socket);
    // Read what comes: two bounds end a connection with no request at the handshake timeout, the
    // sidecar's first-request timer (closes silently) and node's headers timeout, which counts
    // from the connection's start (answers 408, then closes). A socket whose data is never read
    // never sees the end of the stream, so it would not close after a 408.
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    const start = Date.now();
    await waitFor(() => closed() !== undefined, 'the silent TLS connection to be closed', 5000);
    expect(closed()! - start).toBeGreaterThanOrEqual(HANDSHAKE_MS - 50);
    expect(received === '' || received.startsWith('HTTP/1.1 408 '), `received: ${JSON.stringify(received)}`).toBe(true);
  });
});
