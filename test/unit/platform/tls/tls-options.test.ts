/**
 * TLS settings read from an option table: which combinations turn TLS on, which are refused
 * (half a pair, a client setting without its switch, a server name that is no host name) and how
 * a file that does not check out is reported, on the flag or variable it came from. The file
 * check itself (pem-files.ts) is replaced where a test needs files that check out; elsewhere it
 * runs for real on files that do not exist.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { OptionReader } from '../../../../src/platform/config/option-reader.js';
import type { OptionSpec } from '../../../../src/platform/config/option-spec.js';
import { readTlsMaterialSync, TlsFileError } from '../../../../src/platform/tls/pem-files.js';
import { readClientTls, readServerTls } from '../../../../src/platform/tls/tls-options.js';

vi.mock('../../../../src/platform/tls/pem-files.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../../../src/platform/tls/pem-files.js')>();
  return { ...real, readTlsMaterialSync: vi.fn(real.readTlsMaterialSync) };
});

const SPECS = {
  tlsCert: { flag: '--tls-cert <file>', env: 'DYN_TLS_CERT', help: 'certificate' },
  tlsKey: { flag: '--tls-key <file>', env: 'DYN_TLS_KEY', help: 'key' },
  tlsClientCa: { flag: '--tls-client-ca <file>', env: 'DYN_TLS_CLIENT_CA', help: 'client CA' },
  workerTls: { flag: '--worker-tls', env: 'DYN_WORKER_TLS', help: 'switch' },
  workerCa: { flag: '--worker-ca <file>', env: 'DYN_WORKER_CA', help: 'CA' },
  workerCert: { flag: '--worker-cert <file>', env: 'DYN_WORKER_CERT', help: 'client certificate' },
  workerKey: { flag: '--worker-key <file>', env: 'DYN_WORKER_KEY', help: 'client key' },
  workerServerName: { flag: '--worker-server-name <name>', env: 'DYN_WORKER_SERVER_NAME', help: 'name' },
  natsCa: { env: 'NATS_CA', help: 'env-only CA' },
  natsCert: { env: 'NATS_CERT', help: 'env-only certificate' },
  natsKey: { env: 'NATS_KEY', help: 'env-only key' },
} as const satisfies Record<string, OptionSpec>;

type Flags = Partial<Record<keyof typeof SPECS, string | boolean>>;
const reader = (flags: Flags = {}, env: Record<string, string> = {}) => new OptionReader(flags, env, SPECS);

const SERVER = { cert: 'tlsCert', key: 'tlsKey', clientCa: 'tlsClientCa' } as const;
const WORKER = { enabled: 'workerTls', ca: 'workerCa', cert: 'workerCert', key: 'workerKey', serverName: 'workerServerName' } as const;
const NATS = { ca: 'natsCa', cert: 'natsCert', key: 'natsKey' } as const;

const check = vi.mocked(readTlsMaterialSync);
/** The files of this test check out (whatever they hold). */
const filesCheckOut = () => check.mockReturnValue({});

// Back to the real check before each test (mockReset restores the implementation given to vi.fn).
beforeEach(() => {
  check.mockReset();
});

describe('readServerTls', () => {
  it('is plaintext, reading no file, when neither certificate, key nor client CA is given', () => {
    const read = reader();
    expect(readServerTls(read, SERVER)).toBeUndefined();
    expect(read.problems).toEqual([]);
    expect(check).not.toHaveBeenCalled();
  });

  it('takes a pair that checks out, trimmed and frozen, and asks no client certificate without a CA', () => {
    filesCheckOut();
    const read = reader({ tlsCert: ' tls.crt ' }, { DYN_TLS_KEY: 'tls.key\n' });
    const config = readServerTls(read, SERVER);
    expect(config).toEqual({ certFile: 'tls.crt', keyFile: 'tls.key', caFile: undefined });
    expect(Object.isFrozen(config)).toBe(true);
    expect(read.problems).toEqual([]);
    expect(check).toHaveBeenCalledWith({ certFile: 'tls.crt', keyFile: 'tls.key', caFile: undefined });
  });

  it('takes the client CA (mTLS) with the pair, and ignores it for a listener that has none', () => {
    filesCheckOut();
    const withCa = reader({ tlsCert: 'tls.crt', tlsKey: 'tls.key', tlsClientCa: 'ca.crt' });
    expect(readServerTls(withCa, SERVER)).toEqual({ certFile: 'tls.crt', keyFile: 'tls.key', caFile: 'ca.crt' });
    const noCaKey = reader({ tlsCert: 'tls.crt', tlsKey: 'tls.key', tlsClientCa: 'ca.crt' });
    expect(readServerTls(noCaKey, { cert: 'tlsCert', key: 'tlsKey' })).toEqual({ certFile: 'tls.crt', keyFile: 'tls.key', caFile: undefined });
  });

  it.each([
    [{ tlsCert: 'tls.crt' }, {}, '--tls-cert needs --tls-key or DYN_TLS_KEY'],
    [{}, { DYN_TLS_KEY: 'tls.key' }, 'DYN_TLS_KEY needs --tls-cert or DYN_TLS_CERT'],
    [{ tlsClientCa: 'ca.crt' }, {}, '--tls-client-ca needs --tls-cert or DYN_TLS_CERT and --tls-key or DYN_TLS_KEY'],
    [{ tlsKey: 'tls.key', tlsClientCa: 'ca.crt' }, {}, '--tls-key needs --tls-cert or DYN_TLS_CERT'],
  ] as const)('refuses half a pair (%j, %j), naming what is missing', (flags, env, problem) => {
    const read = reader(flags, env);
    expect(readServerTls(read, SERVER)).toBeUndefined();
    expect(read.problems).toEqual([problem]);
    expect(check).not.toHaveBeenCalled();
  });

  it.each([
    ['cert', '--tls-cert'],
    ['key', 'DYN_TLS_KEY'],
    ['ca', '--tls-client-ca'],
  ] as const)('reports a %s file that does not check out on its own flag or variable (%s)', (role, source) => {
    check.mockImplementation(() => {
      throw new TlsFileError(role, `${role}.pem`, 'no PEM in it');
    });
    const read = reader({ tlsCert: 'cert.pem', tlsClientCa: 'ca.pem' }, { DYN_TLS_KEY: 'key.pem' });
    expect(readServerTls(read, SERVER)).toBeUndefined();
    expect(read.problems).toEqual([`${source}: "${role}.pem": no PEM in it`]);
  });

  it('reports a file that cannot be read, with the reason, on its flag', () => {
    const read = reader({ tlsCert: 'no-such-dir/tls.crt', tlsKey: 'no-such-dir/tls.key' });
    expect(readServerTls(read, SERVER)).toBeUndefined();
    expect(read.problems).toEqual(['--tls-cert: "no-such-dir/tls.crt": cannot read it (ENOENT)']);
  });

  it('lets an error that is not about a file through', () => {
    check.mockImplementation(() => {
      throw new RangeError('bug');
    });
    expect(() => readServerTls(reader({ tlsCert: 'a', tlsKey: 'b' }), SERVER)).toThrow(RangeError);
  });
});

describe('readClientTls with a switch', () => {
  it('is plaintext, reading no file, when the switch is off and nothing else is given', () => {
    const read = reader();
    expect(readClientTls(read, WORKER)).toBeUndefined();
    expect(read.problems).toEqual([]);
    expect(check).not.toHaveBeenCalled();
  });

  it('refuses every client setting given without the switch, each on its own source', () => {
    const read = reader({ workerCa: 'ca.pem', workerServerName: 'sidecar.internal' }, { DYN_WORKER_CERT: 'c.pem', DYN_WORKER_KEY: 'k.pem' });
    expect(readClientTls(read, WORKER)).toBeUndefined();
    expect(read.problems).toEqual([
      '--worker-ca has no effect without --worker-tls or DYN_WORKER_TLS',
      'DYN_WORKER_CERT has no effect without --worker-tls or DYN_WORKER_TLS',
      'DYN_WORKER_KEY has no effect without --worker-tls or DYN_WORKER_TLS',
      '--worker-server-name has no effect without --worker-tls or DYN_WORKER_TLS',
    ]);
  });

  it('refuses the settings too when the switch is set off explicitly, or to something that is no switch', () => {
    const off = reader({ workerCa: 'ca.pem' }, { DYN_WORKER_TLS: 'false' });
    expect(readClientTls(off, WORKER)).toBeUndefined();
    expect(off.problems).toEqual(['--worker-ca has no effect without --worker-tls or DYN_WORKER_TLS']);
    const bad = reader({ workerCa: 'ca.pem' }, { DYN_WORKER_TLS: 'maybe' });
    expect(readClientTls(bad, WORKER)).toBeUndefined();
    expect(bad.problems).toEqual(['DYN_WORKER_TLS must be true or false, got "maybe"', '--worker-ca has no effect without --worker-tls or DYN_WORKER_TLS']);
  });

  it('with the switch alone: TLS with the system CAs, no client certificate, the host dialled as name', () => {
    const read = reader({ workerTls: true });
    const config = readClientTls(read, WORKER);
    expect(config).toEqual({ caFile: undefined, certFile: undefined, keyFile: undefined, serverName: undefined });
    expect(Object.isFrozen(config)).toBe(true);
    expect(read.problems).toEqual([]);
  });

  it('takes every setting, trimmed, when the files check out', () => {
    filesCheckOut();
    const read = reader(
      {},
      { DYN_WORKER_TLS: 'yes', DYN_WORKER_CA: ' ca.pem', DYN_WORKER_CERT: 'c.pem ', DYN_WORKER_KEY: 'k.pem', DYN_WORKER_SERVER_NAME: ' sidecar.internal ' },
    );
    expect(readClientTls(read, WORKER)).toEqual({ caFile: 'ca.pem', certFile: 'c.pem', keyFile: 'k.pem', serverName: 'sidecar.internal' });
    expect(read.problems).toEqual([]);
    expect(check).toHaveBeenCalledWith({ caFile: 'ca.pem', certFile: 'c.pem', keyFile: 'k.pem', serverName: 'sidecar.internal' });
  });

  it('refuses half a client pair, and checks neither half', () => {
    filesCheckOut();
    const certOnly = reader({ workerTls: true, workerCert: 'c.pem', workerCa: 'ca.pem' });
    expect(readClientTls(certOnly, WORKER)).toEqual({ caFile: 'ca.pem', certFile: undefined, keyFile: undefined, serverName: undefined });
    expect(certOnly.problems).toEqual(['--worker-cert needs --worker-key or DYN_WORKER_KEY']);
    const keyOnly = reader({ workerTls: true }, { DYN_WORKER_KEY: 'k.pem' });
    readClientTls(keyOnly, WORKER);
    expect(keyOnly.problems).toEqual(['DYN_WORKER_KEY needs --worker-cert or DYN_WORKER_CERT']);
    expect(check).toHaveBeenLastCalledWith({ caFile: undefined, certFile: undefined, keyFile: undefined, serverName: undefined });
  });

  it.each(['sidecar internal', 'https://sidecar', 'sidecar:50051', 'a\tb'])('refuses %j as a server name', (name) => {
    const read = reader({ workerTls: true, workerServerName: name });
    readClientTls(read, WORKER);
    expect(read.problems).toEqual([`--worker-server-name must be a host name, got "${name}"`]);
  });

  it.each(['sidecar.internal', 'worker-0', '10.0.0.5'])('takes %j as a server name', (name) => {
    const read = reader({ workerTls: true, workerServerName: name });
    expect(readClientTls(read, WORKER)?.serverName).toBe(name);
    expect(read.problems).toEqual([]);
  });

  it.each([
    ['ca', '--worker-ca'],
    ['cert', '--worker-cert'],
    ['key', 'DYN_WORKER_KEY'],
  ] as const)('reports a %s file that does not check out on %s', (role, source) => {
    check.mockImplementation(() => {
      throw new TlsFileError(role, `${role}.pem`, 'the private key does not parse');
    });
    const read = reader({ workerTls: true, workerCa: 'ca.pem', workerCert: 'cert.pem' }, { DYN_WORKER_KEY: 'key.pem' });
    expect(readClientTls(read, WORKER)).toBeUndefined();
    expect(read.problems).toEqual([`${source}: "${role}.pem": the private key does not parse`]);
  });

  it('reports a CA file that cannot be read', () => {
    const read = reader({ workerTls: true, workerCa: 'no-such-dir/ca.pem' });
    expect(readClientTls(read, WORKER)).toBeUndefined();
    expect(read.problems).toEqual(['--worker-ca: "no-such-dir/ca.pem": cannot read it (ENOENT)']);
  });
});

describe('readClientTls without a switch (NATS)', () => {
  it('is plaintext when no file is given', () => {
    const read = reader();
    expect(readClientTls(read, NATS)).toBeUndefined();
    expect(read.problems).toEqual([]);
  });

  it('is on as soon as any file is given', () => {
    filesCheckOut();
    const read = reader({}, { NATS_CA: 'ca.pem' });
    expect(readClientTls(read, NATS)).toEqual({ caFile: 'ca.pem', certFile: undefined, keyFile: undefined, serverName: undefined });
    expect(read.problems).toEqual([]);
  });

  it('names an env-only option by its variable alone', () => {
    const read = reader({}, { NATS_CERT: 'c.pem' });
    readClientTls(read, NATS);
    expect(read.problems).toEqual(['NATS_CERT needs NATS_KEY']);
  });
});
