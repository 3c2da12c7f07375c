/** PEM files are checked before use: a pair that does not belong together, garbage or an unreadable file is a TlsFileError naming its role and path. */
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  contentsHash,
  describeCertificate,
  expiresAt,
  materialFromContents,
  readTlsMaterialSync,
  TlsFileError,
  validityProblem,
} from '../../../../src/platform/tls/pem-files.js';
import { fixturePki } from '../../../support/fixture-pki.js';

let pki: ReturnType<typeof fixturePki>;

beforeAll(() => {
  pki = fixturePki();
});

afterAll(() => pki?.remove());

function errorOf(fn: () => unknown): TlsFileError {
  try {
    fn();
  } catch (err) {
    if (err instanceof TlsFileError) return err;
    throw err;
  }
  throw new Error('expected a TlsFileError');
}

describe('readTlsMaterialSync', () => {
  it('reads a matching pair and a CA bundle, and names the certificate presented', () => {
    const material = readTlsMaterialSync({ certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.ca.certFile });
    expect(material.cert).toEqual(pki.server.cert);
    expect(material.key).toEqual(pki.server.key);
    expect(material.ca).toEqual(pki.ca.cert);
    expect(material.leaf?.fingerprint256).toBe(new X509Certificate(pki.server.cert).fingerprint256);
  });

  it('takes a CA file alone (a client that only verifies its server)', () => {
    const material = readTlsMaterialSync({ caFile: pki.ca.certFile });
    expect(material.leaf).toBeUndefined();
    expect(material.ca).toEqual(pki.ca.cert);
  });

  it('takes a bundle of several CAs and a chain whose first certificate is the leaf', () => {
    const bundle = pki.write('bundle.pem', Buffer.concat([pki.otherCa.cert, pki.ca.cert]));
    const chain = pki.write('chain.pem', Buffer.concat([pki.server.cert, pki.ca.cert]));
    const material = readTlsMaterialSync({ certFile: chain, keyFile: pki.server.keyFile, caFile: bundle });
    expect(material.leaf?.subject).toContain('CN=server');
  });

  it('refuses a key that belongs to another certificate, naming the key file and the certificate', () => {
    const err = errorOf(() => readTlsMaterialSync({ certFile: pki.server.certFile, keyFile: pki.client.keyFile }));
    expect(err.role).toBe('key');
    expect(err.message).toBe(`"${pki.client.keyFile}": the key does not belong to the certificate in "${pki.server.certFile}"`);
  });

  it.each([
    ['cert', 'garbage', 'no PEM certificate in it'],
    ['cert', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', 'certificate 1 does not parse'],
    ['key', 'garbage', 'no PEM private key in it'],
    ['key', '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n', 'the private key does not parse'],
    ['ca', '', 'no PEM certificate in it'],
  ] as const)('refuses a %s file holding %j', (role, text, reason) => {
    const bad = pki.write(`bad-${role}-${text.length}.pem`, text);
    const files = { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.ca.certFile, [`${role}File`]: bad };
    const err = errorOf(() => readTlsMaterialSync(files));
    expect(err.role).toBe(role);
    expect(err.path).toBe(bad);
    expect(err.message).toContain(reason);
  });

  it('refuses a key file holding the certificate (the commonest mix-up)', () => {
    const err = errorOf(() => readTlsMaterialSync({ certFile: pki.server.certFile, keyFile: pki.server.certFile }));
    expect(err.role).toBe('key');
    expect(err.message).toContain('no PEM private key');
  });

  it('refuses an encrypted key with a reason saying so', () => {
    const err = errorOf(() => readTlsMaterialSync({ certFile: pki.server.certFile, keyFile: pki.encryptedServerKeyFile }));
    expect(err.message).toContain('the key is encrypted');
  });

  it('names an unreadable file and why', () => {
    const missing = join(pki.dir, 'missing.crt');
    const err = errorOf(() => readTlsMaterialSync({ certFile: missing, keyFile: pki.server.keyFile }));
    expect(err.role).toBe('cert');
    expect(err.message).toBe(`"${missing}": cannot read it (ENOENT)`);
    expect(errorOf(() => readTlsMaterialSync({ caFile: pki.dir })).message).toContain('EISDIR');
  });
});

describe('materialFromContents and contentsHash', () => {
  it('checks contents read elsewhere, as a reload does', () => {
    const files = { certFile: 'c', keyFile: 'k' };
    expect(materialFromContents(files, { cert: pki.server.cert, key: pki.server.key }).leaf).toBeDefined();
    expect(() => materialFromContents(files, { cert: pki.server.cert, key: pki.client.key })).toThrow(TlsFileError);
    expect(() => materialFromContents(files, { cert: pki.server.cert })).toThrow(/no PEM private key/);
  });

  it('changes with any byte of any file, and when bytes move from one file to another', () => {
    const base = contentsHash({ cert: Buffer.from('ab'), key: Buffer.from('c') });
    expect(contentsHash({ cert: Buffer.from('ab'), key: Buffer.from('c') })).toBe(base);
    expect(contentsHash({ cert: Buffer.from('ab'), key: Buffer.from('d') })).not.toBe(base);
    expect(contentsHash({ cert: Buffer.from('a'), key: Buffer.from('bc') })).not.toBe(base);
    expect(contentsHash({ cert: Buffer.from('ab'), ca: Buffer.from('c') })).not.toBe(base);
  });
});

describe('certificate facts', () => {
  it('describes a certificate by subject, serial, fingerprint and validity', () => {
    const leaf = new X509Certificate(pki.server.cert);
    expect(describeCertificate(leaf)).toEqual({
      subject: 'CN=server',
      serial: leaf.serialNumber,
      sha256: leaf.fingerprint256,
      not_before: new Date(leaf.validFrom).toISOString(),
      not_after: new Date(leaf.validTo).toISOString(),
    });
  });

  it('says when a certificate is expired or not valid yet', () => {
    const expired = new X509Certificate(pki.expiredServer.cert);
    expect(expiresAt(expired)).toBe(Date.UTC(2020, 0, 2));
    expect(validityProblem(expired, Date.now())).toBe('certificate expired at 2020-01-02T00:00:00.000Z');
    expect(validityProblem(expired, Date.UTC(2019, 11, 31))).toBe('certificate not valid before 2020-01-01T00:00:00.000Z');
    expect(validityProblem(expired, Date.UTC(2020, 0, 1, 12))).toBeUndefined();
  });
});
