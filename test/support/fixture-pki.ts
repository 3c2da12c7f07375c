/**
 * The committed test certificates (test/fixtures/tls, made by its regenerate.sh), copied into a
 * temporary folder so a test can add files beside them. For the unit tier, which starts no
 * processes; integration tests that need fresh certificates use `createTestPki` (certs.ts).
 *
 *   const pki = fixturePki();            // ca, server (SAN 127.0.0.1, localhost), client, otherCa, otherServer, expiredServer
 *   const next = pki.issue('next-server');
 *   pki.remove();
 */
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface CertFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

export interface IssueOptions {
  /** Who signs it; default the test CA. */
  readonly signer?: 'ca' | 'otherCa';
  readonly usage?: 'server' | 'client';
  /** subjectAltName; default IP:127.0.0.1,DNS:localhost. */
  readonly san?: string;
  /** Valid only in 2020. */
  readonly expired?: boolean;
}

export interface TestPki {
  readonly dir: string;
  readonly ca: CertFiles;
  readonly otherCa: CertFiles;
  /** Signed by `ca`, for 127.0.0.1 and localhost. */
  readonly server: CertFiles;
  /** Signed by `ca`, for client authentication. */
  readonly client: CertFiles;
  /** Signed by `otherCa`, for 127.0.0.1 and localhost: untrusted by whoever trusts `ca` only. */
  readonly otherServer: CertFiles;
  /** Signed by `ca`, valid only in 2020. */
  readonly expiredServer: CertFiles;
  issue(name: string, options?: IssueOptions): CertFiles;
  /** Writes `text` to a file in the folder and returns its path. */
  write(name: string, text: string | Buffer): string;
  remove(): void;
}

export function certFiles(dir: string, name: string): CertFiles {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  return { certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile) };
}

const FIXTURES = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));

/** The fixture set; `issue(name)` hands out a committed server certificate by name (`next-server`), options unsupported. */
export function fixturePki(): TestPki & { readonly encryptedServerKeyFile: string } {
  const dir = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-fixture-pki-'));
  for (const file of readdirSync(FIXTURES).filter((f) => f.endsWith('.crt') || f.endsWith('.key'))) copyFileSync(join(FIXTURES, file), join(dir, file));
  return {
    dir,
    ca: certFiles(dir, 'test-ca'),
    otherCa: certFiles(dir, 'other-ca'),
    server: certFiles(dir, 'server'),
    client: certFiles(dir, 'client'),
    otherServer: certFiles(dir, 'other-server'),
    expiredServer: certFiles(dir, 'expired-server'),
    encryptedServerKeyFile: join(dir, 'server-encrypted.key'),
    issue(name, options) {
      if (options !== undefined) throw new Error('fixturePki().issue: options need createTestPki (certs.ts)');
      return certFiles(dir, name);
    },
    write(name, text) {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
