/**
 * The certificate reloader over an in-memory file system and a manual clock: changed files that
 * check out are taken (apply, metric ok, expiry gauge, generation); files that do not are
 * refused once (old material kept, one warning, metric error) and taken when the rotation
 * completes; unchanged files cost nothing.
 */
import { X509Certificate } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CertReloader } from '../../../../src/platform/tls/cert-reloader.js';
import { readTlsMaterialSync, type TlsMaterial } from '../../../../src/platform/tls/pem-files.js';
import { TlsMetrics } from '../../../../src/platform/tls/tls-metrics.js';
import { fixturePki, type CertFiles, type TestPki } from '../../../support/fixture-pki.js';
import { FakeTimers } from '../../../support/fake-timers.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';

const FILES = { certFile: '/secret/tls.crt', keyFile: '/secret/tls.key', caFile: '/secret/ca.crt' };

let pki: TestPki;
let next: CertFiles;
let disk: Map<string, Buffer | Error>;
let applied: TlsMaterial[];
let logger: RecordingLogger;
let registry: Registry;
let timers: FakeTimers;

beforeAll(() => {
  pki = fixturePki();
  next = pki.issue('next-server');
});

afterAll(() => pki?.remove());

beforeEach(() => {
  disk = new Map();
  afterRead = undefined;
  applied = [];
  logger = recordingLogger();
  registry = new Registry();
  timers = new FakeTimers();
  put(pki.server);
});

/** Runs after each file read, before the read resolves: a rotation landing between two reads of one poll. */
let afterRead: ((path: string) => void) | undefined;

function put(pair: { cert: Buffer; key: Buffer }): void {
  disk.set(FILES.certFile, pair.cert);
  disk.set(FILES.keyFile, pair.key);
  disk.set(FILES.caFile, pki.ca.cert);
}

function reloader(apply: (material: TlsMaterial) => void = (m) => void applied.push(m)): CertReloader {
  return new CertReloader({
    label: 'ingress',
    files: FILES,
    intervalMs: 5000,
    initial: readTlsMaterialSync({ certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.ca.certFile }),
    apply,
    logger,
    metrics: new TlsMetrics(registry, 'dynamo_sidecar'),
    readFile: (path) => {
      const content = disk.get(path);
      afterRead?.(path);
      return content instanceof Error
        ? Promise.reject(content)
        : content
          ? Promise.resolve(content)
          : Promise.reject(Object.assign(new Error('no such file'), { code: 'ENOENT' }));
    },
    timers,
  });
}

async function counter(result: 'ok' | 'error'): Promise<number> {
  const metric = await registry.getSingleMetric('dynamo_sidecar_tls_reloads_total')!.get();
  return metric.values.find((v) => v.labels['listener'] === 'ingress' && v.labels['result'] === result)?.value ?? NaN;
}

async function expiry(): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('dynamo_sidecar_tls_cert_expiry_timestamp_seconds')!.get();
  return metric.values.find((v) => v.labels['listener'] === 'ingress')?.value;
}

const notAfterSeconds = (cert: Buffer): number => Math.floor(Date.parse(new X509Certificate(cert).validTo) / 1000);

describe('CertReloader', () => {
  it('starts with the material in use: counters at 0, the expiry of the certificate presented', async () => {
    const r = reloader();
    expect(r.generation).toBe(0);
    expect(await counter('ok')).toBe(0);
    expect(await counter('error')).toBe(0);
    expect(await expiry()).toBe(notAfterSeconds(pki.server.cert));
  });

  it('does nothing while the files are unchanged', async () => {
    const r = reloader();
    expect(await r.poll()).toBe('unchanged');
    expect(await r.poll()).toBe('unchanged');
    expect(applied).toHaveLength(0);
    expect(logger.lines).toHaveLength(0);
  });

  it('takes a rotated pair: applied once, generation and counter up, expiry of the new certificate, one log line', async () => {
    const r = reloader();
    put(next);
    expect(await r.poll()).toBe('ok');
    expect(applied).toHaveLength(1);
    expect(applied[0]!.cert).toEqual(next.cert);
    expect(r.current.leaf?.fingerprint256).toBe(new X509Certificate(next.cert).fingerprint256);
    expect(r.generation).toBe(1);
    expect(await counter('ok')).toBe(1);
    expect(await expiry()).toBe(notAfterSeconds(next.cert));
    expect(logger.find('TLS certificate files reloaded', 'info')).toHaveLength(1);
    expect(await r.poll()).toBe('unchanged');
    expect(applied).toHaveLength(1);
  });

  it('takes a rotated CA alone (a client CA bundle gaining a CA)', async () => {
    const r = reloader();
    disk.set(FILES.caFile, Buffer.concat([pki.ca.cert, pki.otherCa.cert]));
    expect(await r.poll()).toBe('ok');
    expect(r.current.ca?.length).toBe(pki.ca.cert.length + pki.otherCa.cert.length);
  });

  it('refuses half a rotation (new certificate, old key) once, keeps the old material, and takes the rotation when the key follows', async () => {
    const r = reloader();
    disk.set(FILES.certFile, next.cert);
    expect(await r.poll()).toBe('error');
    expect(await r.poll()).toBe('unchanged');
    expect(await r.poll()).toBe('unchanged');
    expect(applied).toHaveLength(0);
    expect(r.current.cert).toEqual(pki.server.cert);
    expect(r.generation).toBe(0);
    expect(await counter('error')).toBe(1);
    expect(await expiry()).toBe(notAfterSeconds(pki.server.cert));
    const warnings = logger.lines.filter((l) => l.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.fields).toMatchObject({ listener: 'ingress', file: 'key', reason: expect.stringContaining('does not belong to the certificate') });

    disk.set(FILES.keyFile, next.key);
    expect(await r.poll()).toBe('ok');
    expect(r.current.cert).toEqual(next.cert);
    expect(await counter('ok')).toBe(1);
    expect(await counter('error')).toBe(1);
  });

  it('takes a rotation that landed between reading the certificate and the key as the rotation, reporting no refusal', async () => {
    const r = reloader();
    afterRead = (path) => {
      if (path !== FILES.certFile) return;
      afterRead = undefined;
      put(next); // the atomic swap, after this poll read the old certificate
    };
    expect(await r.poll()).toBe('unchanged');
    expect(await counter('error')).toBe(0);
    expect(logger.lines.filter((l) => l.level === 'warn')).toHaveLength(0);
    expect(await r.poll()).toBe('ok');
    expect(r.current.cert).toEqual(next.cert);
  });

  it('refuses a garbage file and a missing one, each once, and logs the path but never the contents', async () => {
    const r = reloader();
    disk.set(FILES.keyFile, Buffer.from('-----BEGIN PRIVATE KEY-----\nhalf written'));
    expect(await r.poll()).toBe('error');
    disk.delete(FILES.keyFile);
    expect(await r.poll()).toBe('error');
    expect(await r.poll()).toBe('unchanged');
    expect(await counter('error')).toBe(2);
    const reasons = logger.lines.map((l) => String(l.fields['reason']));
    expect(reasons).toEqual([expect.stringContaining('the private key does not parse'), `"${FILES.keyFile}": cannot read it (ENOENT)`]);
    expect(JSON.stringify(logger.lines)).not.toContain('half written');
  });

  it('going back to the files in use clears a refusal, so the same broken content later is reported again', async () => {
    const r = reloader();
    disk.set(FILES.certFile, Buffer.from('garbage'));
    expect(await r.poll()).toBe('error');
    put(pki.server);
    expect(await r.poll()).toBe('unchanged');
    disk.set(FILES.certFile, Buffer.from('garbage'));
    expect(await r.poll()).toBe('error');
    expect(await counter('error')).toBe(2);
  });

  it('counts an apply that throws as refused and keeps the old material', async () => {
    const r = reloader(() => {
      throw new Error('setSecureContext refused it');
    });
    put(next);
    expect(await r.poll()).toBe('error');
    expect(r.current.cert).toEqual(pki.server.cert);
    expect(r.generation).toBe(0);
    expect(logger.lines[0]!.fields['reason']).toBe('setSecureContext refused it');
  });

  it('warns when the new certificate is expired, and still takes it (the gauge shows it)', async () => {
    const r = reloader();
    put(pki.expiredServer);
    expect(await r.poll()).toBe('ok');
    expect(logger.find('TLS reload took a certificate that is not valid now: certificate expired at 2020-01-02T00:00:00.000Z', 'warn')).toHaveLength(1);
    expect(await expiry()).toBe(Date.UTC(2020, 0, 2) / 1000);
  });

  it('polls every interval after start, one poll at a time, and not after stop', async () => {
    const r = reloader();
    r.start();
    expect(timers.active).toBe(1);
    put(next);
    timers.advance(4999);
    expect(applied).toHaveLength(0);
    timers.advance(1);
    await waitForPoll();
    expect(applied).toHaveLength(1);
    expect(timers.active).toBe(1); // the next poll, scheduled once this one ended
    r.stop();
    expect(timers.active).toBe(0);
  });

  it('never polls with an interval of 0', () => {
    const r = new CertReloader({ label: 'x', files: {}, intervalMs: 0, initial: {}, apply: () => {}, logger, timers });
    r.start();
    expect(timers.active).toBe(0);
  });
});

/** The poll started by a timer reads the in-memory files through a few promise turns. */
async function waitForPoll(): Promise<void> {
  for (let i = 0; i < 50 && timers.active === 0; i++) await Promise.resolve();
}
