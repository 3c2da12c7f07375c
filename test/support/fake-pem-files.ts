/**
 * A stand-in for pem-files.ts's file checks, so the TLS endpoints (server-tls.ts, client-tls.ts)
 * can be unit-tested without real certificates: files are still read from disk, but a
 * "certificate" is one line written by `fakeCertificate` (name and validity) and a key or CA is
 * any text; text that is empty or starts with "bad" does not check out (a TlsFileError, as a
 * half-written file would be). Everything else of pem-files.ts stays real.
 *
 *   vi.mock('../../../../src/platform/tls/pem-files.js', async (importOriginal) =>
 *     (await import('../../../support/fake-pem-files.js')).fakePemFiles(await importOriginal()));
 */
import type { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type * as PemFiles from '../../src/platform/tls/pem-files.js';

/** The text of a fake certificate for `name`, valid from `validFrom` to `validTo` (ISO 8601). */
export function fakeCertificate(name: string, validTo = '2099-01-01T00:00:00.000Z', validFrom = '2020-01-01T00:00:00.000Z'): string {
  return `fake-cert ${name} ${validFrom} ${validTo}\n`;
}

/** The fields of X509Certificate that pem-files.ts and tls-metrics.ts read, from a fake certificate's text. */
function leafOf(text: string): X509Certificate {
  const [, name = '', validFrom = '', validTo = ''] = text.trim().split(' ');
  return {
    subject: `CN=${name}`,
    serialNumber: Buffer.from(name).toString('hex').toUpperCase(),
    fingerprint256: `FA:KE:${name}`,
    validFrom,
    validTo,
  } as X509Certificate;
}

export function fakePemFiles(real: typeof PemFiles): typeof PemFiles {
  const materialFromContents: typeof PemFiles.materialFromContents = (files, contents) => {
    for (const [role, path] of real.filesByRole(files)) {
      const text = contents[role]?.toString('utf8') ?? '';
      if (text === '' || text.startsWith('bad')) throw new real.TlsFileError(role, path, 'no PEM in it (fake check)');
    }
    const cert = files.certFile === undefined ? undefined : contents.cert;
    return { cert, key: contents.key, ca: contents.ca, leaf: cert && leafOf(cert.toString('utf8')) };
  };
  const readTlsMaterialSync: typeof PemFiles.readTlsMaterialSync = (files) => {
    const contents: Partial<Record<PemFiles.TlsFileRole, Buffer>> = {};
    for (const [role, path] of real.filesByRole(files)) {
      try {
        contents[role] = readFileSync(path);
      } catch (err) {
        throw real.unreadable(role, path, err);
      }
    }
    return materialFromContents(files, contents);
  };
  return { ...real, materialFromContents, readTlsMaterialSync };
}
