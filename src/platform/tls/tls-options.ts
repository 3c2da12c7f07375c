/**
 * TLS settings read from a command's option table, checked at startup like every other value:
 * a certificate without its key (or the reverse), a file that cannot be read or does not parse,
 * a key that does not belong to its certificate, or a client setting given without the switch
 * that turns client TLS on, is a problem naming the flag or variable (exit 2). The files are
 * read here once to check them; the endpoints read them again when they start, and then on
 * every change (cert-reloader.ts).
 */
import type { OptionReader } from '../config/option-reader.js';
import type { OptionSpec } from '../config/option-spec.js';
import { readTlsMaterialSync, TlsFileError, type TlsFileRole, type TlsFiles } from './pem-files.js';

/** A TLS listener: its certificate chain and key, and the CA client certificates must chain to (mTLS) when set. */
export interface ServerTlsConfig extends TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** Set: every client must present a certificate signed by this CA. */
  readonly caFile: string | undefined;
}

/** A TLS client: the CA its server must chain to (else the system's), its own certificate for mTLS, the name to verify. */
export interface ClientTlsConfig extends TlsFiles {
  readonly caFile: string | undefined;
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
  /** SNI and the name the server's certificate must carry; default the host dialled. */
  readonly serverName: string | undefined;
}

type Specs = Readonly<Record<string, OptionSpec>>;
type Key<S extends Specs> = keyof S & string;
type Found = { value: string; source: string } | undefined;

/** The listener's TLS files, or undefined for plaintext (neither certificate nor key given). */
export function readServerTls<S extends Specs>(read: OptionReader<S>, keys: { cert: Key<S>; key: Key<S>; clientCa?: Key<S> }): ServerTlsConfig | undefined {
  const cert = path(read, keys.cert);
  const key = path(read, keys.key);
  const ca = keys.clientCa === undefined ? undefined : path(read, keys.clientCa);
  if (!cert || !key) {
    const given = cert ?? key ?? ca;
    const missing = [...(cert ? [] : [keys.cert]), ...(key ? [] : [keys.key])];
    if (given) read.report(given.source, `needs ${missing.map((k) => read.names(k)).join(' and ')}`);
    return undefined;
  }
  const files: ServerTlsConfig = { certFile: cert.value, keyFile: key.value, caFile: ca?.value };
  return checked(read, files, { cert, key, ca });
}

/**
 * A client's TLS settings, or undefined for plaintext. With `enabled` (a switch), TLS is on
 * exactly when it is set and the other settings without it are refused; without, TLS is on when
 * any file is given (NATS: nats.js then requires TLS of the server).
 */
export function readClientTls<S extends Specs>(
  read: OptionReader<S>,
  keys: { enabled?: Key<S>; ca: Key<S>; cert: Key<S>; key: Key<S>; serverName?: Key<S> },
): ClientTlsConfig | undefined {
  const ca = path(read, keys.ca);
  const cert = path(read, keys.cert);
  const key = path(read, keys.key);
  const serverName = keys.serverName === undefined ? undefined : path(read, keys.serverName);
  const given = [ca, cert, key, serverName].filter((found) => found !== undefined);
  const enabled = keys.enabled === undefined ? given.length > 0 : read.boolean(keys.enabled);
  if (!enabled) {
    for (const found of given) read.report(found.source, `has no effect without ${read.names(keys.enabled!)}`);
    return undefined;
  }
  if (cert && !key) read.report(cert.source, `needs ${read.names(keys.key)}`);
  if (key && !cert) read.report(key.source, `needs ${read.names(keys.cert)}`);
  if (serverName && /[\s/:]/.test(serverName.value)) read.report(serverName.source, `must be a host name, got "${serverName.value}"`);
  const pair = cert && key;
  const files: ClientTlsConfig = {
    caFile: ca?.value,
    certFile: pair ? cert.value : undefined,
    keyFile: pair ? key.value : undefined,
    serverName: serverName?.value,
  };
  return checked(read, files, { cert, key, ca });
}

function path<S extends Specs>(read: OptionReader<S>, key: Key<S>): Found {
  const found = read.raw(key);
  return found && { value: found.value.trim(), source: found.source };
}

/** The files when they check out (frozen), else undefined with the problem naming the file's flag or variable. */
function checked<S extends Specs, T extends TlsFiles>(read: OptionReader<S>, files: T, sources: Record<TlsFileRole, Found>): T | undefined {
  try {
    readTlsMaterialSync(files);
  } catch (err) {
    if (!(err instanceof TlsFileError)) throw err;
    read.report(sources[err.role]?.source ?? err.role, `: ${err.message}`);
    return undefined;
  }
  return Object.freeze(files);
}
