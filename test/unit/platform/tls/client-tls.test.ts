/**
 * One TLS client's files (the sidecar to its engine, the frontend to the sidecars): what each new
 * connection is given (CA, client certificate, SNI only for host names, the server name verified
 * instead of the host dialled), the startup line, failed handshakes counted, and rotated files
 * taken for new connections only, on a fake clock. The certificate checks are faked
 * (fake-pem-files.ts): no real certificate is needed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PeerCertificate } from 'node:tls';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClientTls } from '../../../../src/platform/tls/client-tls.js';
import { TlsFileError } from '../../../../src/platform/tls/pem-files.js';
import { TlsMetrics } from '../../../../src/platform/tls/tls-metrics.js';
import type { ClientTlsConfig } from '../../../../src/platform/tls/tls-options.js';
import { fakeCertificate } from '../../../support/fake-pem-files.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';

vi.mock('../../../../src/platform/tls/pem-files.js', async (importOriginal) =>
  (await import('../../../support/fake-pem-files.js')).fakePemFiles(await importOriginal()),
);

const dir = mkdtempSync(join(tmpdir(), 'client-tls-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CA = join(dir, 'ca.crt');
const CERT = join(dir, 'client.crt');
const KEY = join(dir, 'client.key');

const SYSTEM_CAS: ClientTlsConfig = { caFile: undefined, certFile: undefined, keyFile: undefined, serverName: undefined };
const MTLS: ClientTlsConfig = { caFile: CA, certFile: CERT, keyFile: KEY, serverName: undefined };

function put(name: string): { ca: Buffer; cert: Buffer; key: Buffer } {
  const files = { ca: Buffer.from(`ca ${name}\n`), cert: Buffer.from(fakeCertificate(name, '2099-03-01T00:00:00.000Z')), key: Buffer.from(`key ${name}\n`) };
  writeFileSync(CA, files.ca);
  writeFileSync(CERT, files.cert);
  writeFileSync(KEY, files.key);
  return files;
}

/** A server certificate as tls.checkServerIdentity reads it. */
const peer = (subjectaltname: string) => ({ subject: { CN: 'server' }, subjectaltname }) as unknown as PeerCertificate;

let logger: RecordingLogger;
let registry: Registry;
let metrics: TlsMetrics;
let opened: ClientTls[];

beforeEach(() => {
  vi.useFakeTimers();
  logger = recordingLogger();
  registry = new Registry();
  metrics = new TlsMetrics(registry, 'dynamo_frontend');
  opened = [];
});

afterEach(() => {
  for (const tls of opened) tls.close();
  vi.useRealTimers();
});

function load(config: ClientTlsConfig, intervalMs = 1000): ClientTls {
  const tls = ClientTls.load(config, 'worker-client', { intervalMs, logger, metrics });
  opened.push(tls);
  return tls;
}

async function metric(name: string, labels: Record<string, string>): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)!.get()).values;
  return values.find((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))?.value;
}

describe('ClientTls.load', () => {
  it('needs no file for the system CAs', () => {
    const tls = load(SYSTEM_CAS);
    expect(tls.material).toEqual({ cert: undefined, key: undefined, ca: undefined, leaf: undefined });
    expect(tls.config).toBe(SYSTEM_CAS);
    expect(tls.generation).toBe(0);
  });

  it('refuses files that do not check out, naming the file', () => {
    put('client');
    writeFileSync(CA, 'bad bundle');
    expect(() => load(MTLS)).toThrow(TlsFileError);
    expect(() => load(MTLS)).toThrow(`"${CA}": no PEM in it (fake check)`);
    expect(() => load({ ...MTLS, keyFile: join(dir, 'missing.key') })).toThrow('cannot read it (ENOENT)');
  });
});

describe('ClientTls.connectOptions', () => {
  it('with the system CAs: only SNI, the host dialled', () => {
    expect(load(SYSTEM_CAS).connectOptions('sidecar-0.workers.svc')).toEqual({ servername: 'sidecar-0.workers.svc' });
  });

  it.each(['10.0.0.5', '::1', 'fd00::5'])('sends no SNI when dialling the address %s (verified against IP SANs instead)', (address) => {
    expect(load(SYSTEM_CAS).connectOptions(address)).toEqual({});
  });

  it('gives the CA and the client certificate and key', () => {
    const files = put('client');
    expect(load(MTLS).connectOptions('engine')).toEqual({ ca: files.ca, cert: files.cert, key: files.key, servername: 'engine' });
  });

  it('gives no client certificate when only a CA is set', () => {
    const files = put('client');
    expect(load({ ...SYSTEM_CAS, caFile: CA }).connectOptions('engine')).toEqual({ ca: files.ca, servername: 'engine' });
  });

  it('with a server name: sends it as SNI, even when dialling an address, and verifies it, not the host dialled', () => {
    const options = load({ ...SYSTEM_CAS, serverName: 'engine.internal' }).connectOptions('10.0.0.5');
    expect(options.servername).toBe('engine.internal');
    const verify = options.checkServerIdentity!;
    expect(verify('10.0.0.5', peer('DNS:engine.internal'))).toBeUndefined();
    expect(verify('10.0.0.5', peer('DNS:other.internal'))).toBeInstanceOf(Error);
    expect(verify('10.0.0.5', peer('IP Address:10.0.0.5'))).toBeInstanceOf(Error);
  });

  it('with an address as server name: no SNI, and that address verified', () => {
    const options = load({ ...SYSTEM_CAS, serverName: '10.9.9.9' }).connectOptions('sidecar.internal');
    expect(options).not.toHaveProperty('servername');
    expect(options.checkServerIdentity!('sidecar.internal', peer('IP Address:10.9.9.9'))).toBeUndefined();
    expect(options.checkServerIdentity!('sidecar.internal', peer('DNS:sidecar.internal'))).toBeInstanceOf(Error);
  });

  it("leaves verification to node's default (the host dialled) without a server name", () => {
    expect(load(SYSTEM_CAS).connectOptions('engine')).not.toHaveProperty('checkServerIdentity');
  });
});

describe('ClientTls.start', () => {
  it('logs the CA and the client certificate it presents', () => {
    put('client');
    load({ ...MTLS, serverName: 'engine.internal' }).start();
    expect(logger.find('TLS to', 'info').map((l) => l.fields)).toEqual([
      {
        listener: 'worker-client',
        ca: CA,
        server_name: 'engine.internal',
        subject: 'CN=client',
        serial: Buffer.from('client').toString('hex').toUpperCase(),
        sha256: 'FA:KE:client',
        not_before: '2020-01-01T00:00:00.000Z',
        not_after: '2099-03-01T00:00:00.000Z',
      },
    ]);
  });

  it('says "system" CAs and no client certificate when none is set', () => {
    load(SYSTEM_CAS).start();
    expect(logger.find('TLS to', 'info').map((l) => l.fields)).toEqual([{ listener: 'worker-client', ca: 'system', client_certificate: 'none' }]);
  });

  it('sets the metrics up at 0 and the expiry of the client certificate, and counts failed handshakes', async () => {
    put('client');
    const tls = load(MTLS);
    expect(await metric('dynamo_frontend_tls_handshake_failures_total', { listener: 'worker-client' })).toBe(0);
    expect(await metric('dynamo_frontend_tls_cert_expiry_timestamp_seconds', { listener: 'worker-client' })).toBe(Date.UTC(2099, 2, 1) / 1000);
    tls.handshakeFailed();
    tls.handshakeFailed();
    expect(await metric('dynamo_frontend_tls_handshake_failures_total', { listener: 'worker-client' })).toBe(2);
  });
});

describe('ClientTls reloads', () => {
  it('takes rotated files for new connections; options already built keep the old ones', async () => {
    const first = put('client');
    const tls = load(MTLS);
    tls.start();
    const before = tls.connectOptions('engine');
    const next = put('client-2');
    await vi.advanceTimersByTimeAsync(1000);
    await vi.waitFor(() => expect(tls.generation).toBe(1));
    expect(tls.connectOptions('engine')).toEqual({ ca: next.ca, cert: next.cert, key: next.key, servername: 'engine' });
    expect(before).toEqual({ ca: first.ca, cert: first.cert, key: first.key, servername: 'engine' });
    expect(await metric('dynamo_frontend_tls_reloads_total', { listener: 'worker-client', result: 'ok' })).toBe(1);
  });

  it('keeps the files in use when the rotated ones do not check out', async () => {
    const first = put('client');
    const tls = load(MTLS);
    tls.start();
    writeFileSync(KEY, 'bad: from another rotation');
    await vi.advanceTimersByTimeAsync(1000);
    await vi.waitFor(async () => expect(await metric('dynamo_frontend_tls_reloads_total', { listener: 'worker-client', result: 'error' })).toBe(1));
    expect(tls.generation).toBe(0);
    expect(tls.material.key).toEqual(first.key);
  });

  it('reads the files only after start(), and never again after close()', () => {
    put('client');
    const tls = load(MTLS);
    expect(vi.getTimerCount()).toBe(0);
    tls.start();
    expect(vi.getTimerCount()).toBe(1);
    tls.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
