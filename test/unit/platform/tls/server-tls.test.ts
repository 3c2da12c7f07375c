/**
 * One TLS listener's certificate: the server's constructor options (mTLS exactly when a client
 * CA is set), then serve(): the startup line, a warning for a certificate not valid now, failed
 * handshakes counted, and rotated files put in use with setSecureContext on a fake clock. The
 * certificate checks are faked (fake-pem-files.ts): no real certificate is needed.
 */
import { EventEmitter } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SecureContextOptions } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TlsFileError } from '../../../../src/platform/tls/pem-files.js';
import { ServerTls, type ReloadableTlsServer, type TlsDeps } from '../../../../src/platform/tls/server-tls.js';
import { TlsMetrics } from '../../../../src/platform/tls/tls-metrics.js';
import type { ServerTlsConfig } from '../../../../src/platform/tls/tls-options.js';
import { fakeCertificate } from '../../../support/fake-pem-files.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';

vi.mock('../../../../src/platform/tls/pem-files.js', async (importOriginal) =>
  (await import('../../../support/fake-pem-files.js')).fakePemFiles(await importOriginal()),
);

const dir = mkdtempSync(join(tmpdir(), 'server-tls-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FILES = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), caFile: join(dir, 'client-ca.crt') };
const PLAIN: ServerTlsConfig = { certFile: FILES.certFile, keyFile: FILES.keyFile, caFile: undefined };
const MTLS: ServerTlsConfig = FILES;

/** Writes the listener's files; returns their contents as node reads them. */
function put(name: string, validTo?: string, validFrom?: string): { cert: Buffer; key: Buffer; ca: Buffer } {
  const files = { cert: Buffer.from(fakeCertificate(name, validTo, validFrom)), key: Buffer.from(`key of ${name}\n`), ca: Buffer.from(`ca for ${name}\n`) };
  writeFileSync(FILES.certFile, files.cert);
  writeFileSync(FILES.keyFile, files.key);
  writeFileSync(FILES.caFile, files.ca);
  return files;
}

class FakeServer extends EventEmitter implements ReloadableTlsServer {
  readonly contexts: SecureContextOptions[] = [];
  setSecureContext(options: SecureContextOptions): void {
    this.contexts.push(options);
  }
}

let logger: RecordingLogger;
let registry: Registry;
let metrics: TlsMetrics;
let tlsList: ServerTls[];

beforeEach(() => {
  vi.useFakeTimers();
  logger = recordingLogger();
  registry = new Registry();
  metrics = new TlsMetrics(registry, 'dynamo_sidecar');
  tlsList = [];
});

afterEach(() => {
  for (const tls of tlsList) tls.close();
  vi.useRealTimers();
});

function load(config: ServerTlsConfig, intervalMs = 1000, label = 'ingress'): ServerTls {
  const deps: TlsDeps = { intervalMs, logger, metrics };
  const tls = ServerTls.load(config, label, deps);
  tlsList.push(tls);
  return tls;
}

async function metric(name: string, labels: Record<string, string>): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)!.get()).values;
  return values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))?.value;
}

describe('ServerTls.load', () => {
  it('refuses files that do not check out, naming the file', () => {
    put('server');
    writeFileSync(FILES.keyFile, 'bad key');
    expect(() => load(PLAIN)).toThrow(TlsFileError);
    expect(() => load(PLAIN)).toThrow(`"${FILES.keyFile}": no PEM in it (fake check)`);
    expect(() => load({ ...PLAIN, certFile: join(dir, 'missing.crt') })).toThrow('cannot read it (ENOENT)');
  });
});

describe('ServerTls.serverOptions', () => {
  it('without a client CA: the certificate and key, and no client certificate asked', () => {
    const files = put('server');
    expect(load(PLAIN).serverOptions).toEqual({ cert: files.cert, key: files.key, requestCert: false, rejectUnauthorized: false });
  });

  it('with a client CA: the CA too, and every client must present a certificate it signed', () => {
    const files = put('server');
    expect(load(MTLS).serverOptions).toEqual({ cert: files.cert, key: files.key, ca: files.ca, requestCert: true, rejectUnauthorized: true });
  });
});

describe('ServerTls.serve', () => {
  it('logs the listener and its certificate, and sets its metrics up: counters at 0, the expiry', async () => {
    put('server', '2099-06-01T00:00:00.000Z');
    load(MTLS).serve(new FakeServer());
    expect(logger.find('TLS on', 'info')).toEqual([
      {
        level: 'info',
        msg: 'TLS on',
        fields: {
          listener: 'ingress',
          client_certificates: 'required',
          subject: 'CN=server',
          serial: Buffer.from('server').toString('hex').toUpperCase(),
          sha256: 'FA:KE:server',
          not_before: '2020-01-01T00:00:00.000Z',
          not_after: '2099-06-01T00:00:00.000Z',
        },
      },
    ]);
    expect(logger.lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(await metric('dynamo_sidecar_tls_reloads_total', { listener: 'ingress', result: 'ok' })).toBe(0);
    expect(await metric('dynamo_sidecar_tls_reloads_total', { listener: 'ingress', result: 'error' })).toBe(0);
    expect(await metric('dynamo_sidecar_tls_handshake_failures_total', { listener: 'ingress' })).toBe(0);
    expect(await metric('dynamo_sidecar_tls_cert_expiry_timestamp_seconds', { listener: 'ingress' })).toBe(Date.UTC(2099, 5, 1) / 1000);
  });

  it('says client certificates are not asked without a client CA', () => {
    put('server');
    load(PLAIN, 1000, 'system').serve(new FakeServer());
    expect(logger.find('TLS on')[0]!.fields).toMatchObject({ listener: 'system', client_certificates: 'not asked' });
  });

  it.each([
    ['expired', '2021-01-01T00:00:00.000Z', undefined, 'certificate expired at 2021-01-01T00:00:00.000Z'],
    ['not yet valid', '2099-01-01T00:00:00.000Z', '2098-01-01T00:00:00.000Z', 'certificate not valid before 2098-01-01T00:00:00.000Z'],
  ])('warns, and still serves, when the certificate is %s', (_what, validTo, validFrom, problem) => {
    put('server', validTo, validFrom);
    const server = new FakeServer();
    load(PLAIN).serve(server);
    expect(logger.find(`TLS ingress: the certificate is not valid now: ${problem}`, 'warn')).toEqual([
      { level: 'warn', msg: `TLS ingress: the certificate is not valid now: ${problem}`, fields: { listener: 'ingress' } },
    ]);
    expect(logger.find('TLS on', 'info')).toHaveLength(1);
  });

  it("counts and logs (at debug) each failed handshake of the server's clients", async () => {
    put('server');
    const server = new FakeServer();
    load(MTLS).serve(server);
    server.emit('tlsClientError', new Error('peer did not return a certificate'), { remoteAddress: '10.1.2.3' });
    server.emit('tlsClientError', new Error('unknown ca'), {});
    expect(await metric('dynamo_sidecar_tls_handshake_failures_total', { listener: 'ingress' })).toBe(2);
    expect(logger.find('TLS handshake failed', 'debug').map((l) => l.fields)).toEqual([
      { listener: 'ingress', remote: '10.1.2.3', reason: 'peer did not return a certificate' },
      { listener: 'ingress', remote: undefined, reason: 'unknown ca' },
    ]);
  });

  it('puts rotated files in use with setSecureContext, and constructs later servers with them', async () => {
    put('server');
    const tls = load(MTLS);
    const server = new FakeServer();
    tls.serve(server);
    expect(server.contexts).toEqual([]);
    const next = put('server-2', '2099-12-31T00:00:00.000Z');
    await vi.advanceTimersByTimeAsync(1000);
    await vi.waitFor(() => expect(server.contexts).toHaveLength(1));
    expect(server.contexts[0]).toEqual({ cert: next.cert, key: next.key, ca: next.ca });
    expect(tls.serverOptions).toEqual({ cert: next.cert, key: next.key, ca: next.ca, requestCert: true, rejectUnauthorized: true });
    expect(await metric('dynamo_sidecar_tls_reloads_total', { listener: 'ingress', result: 'ok' })).toBe(1);
    expect(await metric('dynamo_sidecar_tls_cert_expiry_timestamp_seconds', { listener: 'ingress' })).toBe(Date.UTC(2099, 11, 31) / 1000);
  });

  it('gives setSecureContext no CA for a listener without client certificates', async () => {
    put('server');
    const server = new FakeServer();
    load(PLAIN).serve(server);
    const next = put('server-2');
    await vi.advanceTimersByTimeAsync(1000);
    await vi.waitFor(() => expect(server.contexts).toHaveLength(1));
    expect(server.contexts[0]).toEqual({ cert: next.cert, key: next.key });
  });

  it('keeps the certificate in use when the rotated files do not check out', async () => {
    const first = put('server');
    const tls = load(PLAIN);
    const server = new FakeServer();
    tls.serve(server);
    writeFileSync(FILES.keyFile, 'bad: half written');
    await vi.advanceTimersByTimeAsync(1000);
    await vi.waitFor(async () => expect(await metric('dynamo_sidecar_tls_reloads_total', { listener: 'ingress', result: 'error' })).toBe(1));
    expect(server.contexts).toEqual([]);
    expect(tls.serverOptions).toMatchObject({ cert: first.cert, key: first.key });
  });

  it('never reads the files again with an interval of 0', () => {
    put('server');
    load(PLAIN, 0).serve(new FakeServer());
    expect(vi.getTimerCount()).toBe(0);
  });

  it('close() stops the reloads', () => {
    put('server');
    const tls = load(PLAIN);
    tls.serve(new FakeServer());
    expect(vi.getTimerCount()).toBe(1);
    tls.close();
    expect(vi.getTimerCount()).toBe(0);
    tls.close();
    load(PLAIN).close(); // before serve(): nothing to stop
  });
});
