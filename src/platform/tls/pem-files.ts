/**
 * The PEM files of one TLS endpoint (a certificate chain and its key, and/or a CA bundle), read
 * and checked before anything uses them: the certificate parses, the key parses and belongs to
 * the certificate, the CA bundle holds at least one certificate. A problem is a TlsFileError
 * naming the file's role and path, so a caller can name the flag or variable it came from.
 *
 *   const material = readTlsMaterialSync({ certFile, keyFile, caFile });   // at startup
 *   const material = materialFromContents(files, { cert, key, ca });       // on a reload
 *
 * Checking here, rather than letting node's TLS layer find out, is what makes a half-written
 * file or a key from the previous rotation a refused reload instead of a broken listener:
 * `setSecureContext` accepts a key that does not match its certificate, and every handshake
 * after it would fail.
 */
import { X509Certificate, createHash, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** Paths of one endpoint's files; which ones are set depends on its role (server: cert+key, client: any). */
export interface TlsFiles {
  readonly certFile?: string | undefined;
  readonly keyFile?: string | undefined;
  readonly caFile?: string | undefined;
}

export type TlsFileRole = 'cert' | 'key' | 'ca';

/** The files' contents, checked. `leaf` is the first certificate of `cert` (the one presented). */
export interface TlsMaterial {
  readonly cert?: Buffer | undefined;
  readonly key?: Buffer | undefined;
  readonly ca?: Buffer | undefined;
  readonly leaf?: X509Certificate | undefined;
}

export type TlsContents = { readonly [role in TlsFileRole]?: Buffer | undefined };

export class TlsFileError extends Error {
  override readonly name = 'TlsFileError';

  constructor(
    readonly role: TlsFileRole,
    readonly path: string,
    reason: string,
  ) {
    super(`"${path}": ${reason}`);
  }
}

const ROLES: readonly TlsFileRole[] = ['cert', 'key', 'ca'];
const CERT_BLOCK_RE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** The path of each role that is set, in role order. */
export function filesByRole(files: TlsFiles): [TlsFileRole, string][] {
  const paths: Record<TlsFileRole, string | undefined> = { cert: files.certFile, key: files.keyFile, ca: files.caFile };
  return ROLES.filter((role) => paths[role] !== undefined).map((role) => [role, paths[role]!]);
}

/** Reads every file that is set and checks the lot; throws TlsFileError. */
export function readTlsMaterialSync(files: TlsFiles): TlsMaterial {
  const contents: Partial<Record<TlsFileRole, Buffer>> = {};
  for (const [role, path] of filesByRole(files)) {
    try {
      contents[role] = readFileSync(path);
    } catch (err) {
      throw unreadable(role, path, err);
    }
  }
  return materialFromContents(files, contents);
}

/** The error for a file that cannot be read (missing, no permission, a directory). */
export function unreadable(role: TlsFileRole, path: string, err: unknown): TlsFileError {
  return new TlsFileError(role, path, `cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
}

/** Checks the contents of `files` (read elsewhere); throws TlsFileError naming the first bad one. */
export function materialFromContents(files: TlsFiles, contents: TlsContents): TlsMaterial {
  let leaf: X509Certificate | undefined;
  let key: KeyObject | undefined;
  if (files.certFile !== undefined) leaf = certificatesIn(contents.cert, 'cert', files.certFile)[0];
  if (files.keyFile !== undefined) key = privateKeyIn(contents.key, files.keyFile);
  if (files.caFile !== undefined) certificatesIn(contents.ca, 'ca', files.caFile);
  if (leaf && key && !leaf.checkPrivateKey(key)) {
    throw new TlsFileError('key', files.keyFile!, `the key does not belong to the certificate in "${files.certFile}"`);
  }
  return { cert: contents.cert, key: contents.key, ca: contents.ca, leaf };
}

/** sha256 over every role's bytes (length-prefixed, so moving bytes between files changes it). */
export function contentsHash(contents: TlsContents): string {
  const hash = createHash('sha256');
  for (const role of ROLES) {
    const bytes = contents[role];
    hash.update(`${role}:${bytes === undefined ? -1 : bytes.length}:`);
    if (bytes) hash.update(bytes);
  }
  return hash.digest('hex');
}

/** When the certificate stops being valid, ms since the epoch. */
export function expiresAt(leaf: X509Certificate): number {
  return Date.parse(leaf.validTo);
}

/** What logs say about a certificate: enough to tell two rotations apart, nothing secret. */
export function describeCertificate(leaf: X509Certificate): Record<string, string> {
  return {
    subject: leaf.subject.replaceAll('\n', ', '),
    serial: leaf.serialNumber,
    sha256: leaf.fingerprint256,
    not_before: new Date(Date.parse(leaf.validFrom)).toISOString(),
    not_after: new Date(expiresAt(leaf)).toISOString(),
  };
}

/** Whether the certificate is outside its validity period at `now`, and how; undefined when valid. */
export function validityProblem(leaf: X509Certificate, now: number): string | undefined {
  if (now > expiresAt(leaf)) return `certificate expired at ${new Date(expiresAt(leaf)).toISOString()}`;
  const from = Date.parse(leaf.validFrom);
  if (now < from) return `certificate not valid before ${new Date(from).toISOString()}`;
  return undefined;
}

function certificatesIn(pem: Buffer | undefined, role: 'cert' | 'ca', path: string): X509Certificate[] {
  const blocks = pem?.toString('latin1').match(CERT_BLOCK_RE) ?? [];
  if (blocks.length === 0) throw new TlsFileError(role, path, 'no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)');
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new TlsFileError(role, path, `certificate ${i + 1} does not parse (${(err as Error).message})`);
    }
  });
}

function privateKeyIn(pem: Buffer | undefined, path: string): KeyObject {
  const text = pem?.toString('latin1') ?? '';
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(text)) {
    throw new TlsFileError('key', path, 'the key is encrypted; give an unencrypted PEM key');
  }
  if (!/-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/.test(text))
    throw new TlsFileError('key', path, 'no PEM private key in it (expected -----BEGIN PRIVATE KEY-----)');
  try {
    return createPrivateKey({ key: text, format: 'pem' });
  } catch (err) {
    throw new TlsFileError('key', path, `the private key does not parse (${(err as Error).message})`);
  }
}
