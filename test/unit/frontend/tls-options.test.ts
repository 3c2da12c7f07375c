/**
 * The frontend's TLS options: HTTPS for its listeners (mTLS with a client CA), TLS to the
 * workers' sidecars; flags or env twins into the frozen config, and exit 2 naming the flag or
 * variable for a missing half of a pair, a bad file or a worker setting without --worker-tls.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { describeFrontend } from '../../../src/frontend/command.js';
import { fixturePki, type TestPki } from '../../support/fixture-pki.js';
import { problemsOf } from '../../support/config-problems.js';
import { runMain } from '../../support/run-main.js';

let pki: TestPki;

beforeAll(() => {
  pki = fixturePki();
});

afterAll(() => pki?.remove());

const WORKERS = { workers: ['127.0.0.1:50050'] };

describe('frontend TLS config', () => {
  it('is plaintext by default', () => {
    expect(parseFrontendConfig(WORKERS, {}).tls).toEqual({ http: undefined, workers: undefined, reloadIntervalMs: 5000 });
  });

  it('reads HTTPS with mTLS and worker TLS from flags, and says https in the startup line', () => {
    const config = parseFrontendConfig(
      {
        ...WORKERS,
        tlsCert: pki.server.certFile,
        tlsKey: pki.server.keyFile,
        tlsClientCa: pki.ca.certFile,
        workerTls: true,
        workerCa: pki.ca.certFile,
        workerCert: pki.client.certFile,
        workerKey: pki.client.keyFile,
        workerServerName: 'sidecar.internal',
        tlsReloadIntervalMs: '1000',
      },
      {},
    );
    expect(config.tls).toEqual({
      http: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.ca.certFile },
      workers: { caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile, serverName: 'sidecar.internal' },
      reloadIntervalMs: 1000,
    });
    expect(describeFrontend(config, 8443)).toMatch(/^listening on https:\/\/127\.0\.0\.1:8443, /);
  });

  it('reads the same from the env twins', () => {
    const config = parseFrontendConfig(WORKERS, {
      DYN_HTTP_TLS_CERT: pki.server.certFile,
      DYN_HTTP_TLS_KEY: pki.server.keyFile,
      DYN_HTTP_TLS_CLIENT_CA: pki.ca.certFile,
      DYN_FRONTEND_WORKER_TLS: '1',
      DYN_FRONTEND_WORKER_CA: pki.ca.certFile,
      DYN_FRONTEND_WORKER_CERT: pki.client.certFile,
      DYN_FRONTEND_WORKER_KEY: pki.client.keyFile,
      DYN_FRONTEND_WORKER_SERVER_NAME: 'sidecar.internal',
      DYN_TLS_RELOAD_INTERVAL_MS: '0',
    });
    expect(config.tls.http?.caFile).toBe(pki.ca.certFile);
    expect(config.tls.workers?.serverName).toBe('sidecar.internal');
    expect(config.tls.reloadIntervalMs).toBe(0);
  });

  it.each<[string, () => [Record<string, string>, Record<string, string>, string]]>([
    ['a certificate without its key', () => [{ tlsCert: pki.server.certFile }, {}, '--tls-cert needs --tls-key or DYN_HTTP_TLS_KEY']],
    [
      'a key that does not match (env)',
      () => [
        {},
        { DYN_HTTP_TLS_CERT: pki.server.certFile, DYN_HTTP_TLS_KEY: pki.client.keyFile },
        `DYN_HTTP_TLS_KEY: "${pki.client.keyFile}": the key does not belong to the certificate in "${pki.server.certFile}"`,
      ],
    ],
    [
      'an unreadable client CA',
      () => [
        { tlsCert: pki.server.certFile, tlsKey: pki.server.keyFile, tlsClientCa: join(pki.dir, 'none.pem') },
        {},
        `--tls-client-ca: "${join(pki.dir, 'none.pem')}": cannot read it (ENOENT)`,
      ],
    ],
    [
      'a worker CA without --worker-tls',
      () => [{ workerCa: pki.ca.certFile }, {}, '--worker-ca has no effect without --worker-tls or DYN_FRONTEND_WORKER_TLS'],
    ],
    [
      'a worker key without its certificate',
      () => [{ workerTls: 'true', workerKey: pki.client.keyFile }, {}, '--worker-key needs --worker-cert or DYN_FRONTEND_WORKER_CERT'],
    ],
    [
      'a worker CA that is a key',
      () => [
        { workerTls: 'true', workerCa: pki.ca.keyFile },
        {},
        `--worker-ca: "${pki.ca.keyFile}": no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)`,
      ],
    ],
  ])('refuses %s', (_name, input) => {
    const [flags, env, message] = input();
    expect(problemsOf(() => parseFrontendConfig({ ...WORKERS, ...flags }, env))).toEqual([message]);
  });

  it('exits 2 naming the flag, and --help lists every TLS option with its env twin', async () => {
    const bad = await runMain(['frontend', '--worker', '127.0.0.1:1', '--tls-key', pki.server.keyFile]);
    expect(bad.exits).toEqual([2]);
    expect(bad.err).toBe('dynamo-frontend: --tls-key needs --tls-cert or DYN_HTTP_TLS_CERT\n');
    const { out } = await runMain(['frontend', '--help']);
    for (const text of [
      '--tls-cert',
      'DYN_HTTP_TLS_CERT',
      '--tls-client-ca',
      '--worker-tls',
      'DYN_FRONTEND_WORKER_SERVER_NAME',
      '--nats-creds',
      'NATS_AUTH_TOKEN',
    ])
      expect(out).toContain(text);
  });
});
