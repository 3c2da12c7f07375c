/**
 * The sidecar's TLS options as an operator meets them: flag or env twin, parsed into the frozen
 * config; a certificate without its key, an unreadable or unparsable file, a key that does not
 * match, or a client setting without --upstream-tls stops the start with exit 2 and a line
 * naming the flag or variable.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { fixturePki, type TestPki } from '../../../support/fixture-pki.js';
import { problems } from '../../../support/config-problems.js';
import { runMain } from '../../../support/run-main.js';

let pki: TestPki;

beforeAll(() => {
  pki = fixturePki();
});

afterAll(() => pki?.remove());

describe('sidecar TLS config', () => {
  it('is plaintext everywhere by default, with reloads every 5 s', () => {
    expect(parseSidecarConfig({}, {}).tls).toEqual({ ingress: undefined, system: undefined, upstream: undefined, reloadIntervalMs: 5000 });
  });

  it('reads every listener and the engine connection from flags', () => {
    const config = parseSidecarConfig(
      {
        tlsCert: pki.server.certFile,
        tlsKey: pki.server.keyFile,
        tlsClientCa: pki.ca.certFile,
        systemTlsCert: pki.server.certFile,
        systemTlsKey: pki.server.keyFile,
        upstream: '127.0.0.1:50051',
        upstreamTls: true,
        upstreamCa: pki.ca.certFile,
        upstreamCert: pki.client.certFile,
        upstreamKey: pki.client.keyFile,
        upstreamServerName: 'engine.internal',
        tlsReloadIntervalMs: '250',
      },
      {},
    );
    expect(config.tls).toEqual({
      ingress: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: pki.ca.certFile },
      system: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: undefined },
      upstream: { caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile, serverName: 'engine.internal' },
      reloadIntervalMs: 250,
    });
    expect(Object.isFrozen(config.tls)).toBe(true);
    expect(Object.isFrozen(config.tls.ingress)).toBe(true);
  });

  it('reads the same from the env twins', () => {
    const config = parseSidecarConfig(
      {},
      {
        DYN_SIDECAR_TLS_CERT: pki.server.certFile,
        DYN_SIDECAR_TLS_KEY: pki.server.keyFile,
        DYN_SIDECAR_TLS_CLIENT_CA: pki.ca.certFile,
        DYN_SYSTEM_TLS_CERT: pki.server.certFile,
        DYN_SYSTEM_TLS_KEY: pki.server.keyFile,
        DYN_SIDECAR_UPSTREAM: '127.0.0.1:50051',
        DYN_SIDECAR_UPSTREAM_TLS: 'true',
        DYN_SIDECAR_UPSTREAM_CA: pki.ca.certFile,
        DYN_SIDECAR_UPSTREAM_CERT: pki.client.certFile,
        DYN_SIDECAR_UPSTREAM_KEY: pki.client.keyFile,
        DYN_SIDECAR_UPSTREAM_SERVER_NAME: 'engine.internal',
        DYN_TLS_RELOAD_INTERVAL_MS: '0',
      },
    );
    expect(config.tls.ingress?.caFile).toBe(pki.ca.certFile);
    expect(config.tls.system?.certFile).toBe(pki.server.certFile);
    expect(config.tls.upstream).toEqual({ caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile, serverName: 'engine.internal' });
    expect(config.tls.reloadIntervalMs).toBe(0);
  });

  it('takes upstream TLS with the system CAs and no client certificate', () => {
    expect(parseSidecarConfig({ upstream: '10.0.0.1:50051', upstreamTls: true }, {}).tls.upstream).toEqual({
      caFile: undefined,
      certFile: undefined,
      keyFile: undefined,
      serverName: undefined,
    });
  });

  it('the flag wins over its env twin', () => {
    const config = parseSidecarConfig({ tlsCert: pki.server.certFile, tlsKey: pki.server.keyFile }, { DYN_SIDECAR_TLS_CERT: '/nowhere.crt' });
    expect(config.tls.ingress?.certFile).toBe(pki.server.certFile);
  });
});

describe('sidecar TLS problems', () => {
  const missing = (): string => join(pki.dir, 'missing.pem');

  it.each<[string, () => [Record<string, string>, Record<string, string>, string]]>([
    ['a certificate without its key', () => [{ tlsCert: pki.server.certFile }, {}, '--tls-cert needs --tls-key or DYN_SIDECAR_TLS_KEY']],
    [
      'a key without its certificate (env)',
      () => [{}, { DYN_SIDECAR_TLS_KEY: pki.server.keyFile }, 'DYN_SIDECAR_TLS_KEY needs --tls-cert or DYN_SIDECAR_TLS_CERT'],
    ],
    [
      'a client CA alone',
      () => [{ tlsClientCa: pki.ca.certFile }, {}, '--tls-client-ca needs --tls-cert or DYN_SIDECAR_TLS_CERT and --tls-key or DYN_SIDECAR_TLS_KEY'],
    ],
    [
      'a system key without its certificate',
      () => [{ systemTlsKey: pki.server.keyFile }, {}, '--system-tls-key needs --system-tls-cert or DYN_SYSTEM_TLS_CERT'],
    ],
    ['an unreadable certificate', () => [{ tlsCert: missing(), tlsKey: pki.server.keyFile }, {}, `--tls-cert: "${missing()}": cannot read it (ENOENT)`]],
    [
      'an unparsable key (env)',
      () => [
        {},
        { DYN_SYSTEM_TLS_CERT: pki.server.certFile, DYN_SYSTEM_TLS_KEY: pki.ca.certFile },
        `DYN_SYSTEM_TLS_KEY: "${pki.ca.certFile}": no PEM private key in it (expected -----BEGIN PRIVATE KEY-----)`,
      ],
    ],
    [
      'a key that does not match the certificate',
      () => [
        { tlsCert: pki.server.certFile, tlsKey: pki.client.keyFile },
        {},
        `--tls-key: "${pki.client.keyFile}": the key does not belong to the certificate in "${pki.server.certFile}"`,
      ],
    ],
    [
      'a client CA file with no certificate',
      () => [
        { tlsCert: pki.server.certFile, tlsKey: pki.server.keyFile, tlsClientCa: pki.server.keyFile },
        {},
        `--tls-client-ca: "${pki.server.keyFile}": no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)`,
      ],
    ],
    [
      'an upstream CA without --upstream-tls',
      () => [{ upstream: '127.0.0.1:1', upstreamCa: pki.ca.certFile }, {}, '--upstream-ca has no effect without --upstream-tls or DYN_SIDECAR_UPSTREAM_TLS'],
    ],
    [
      'an upstream server name without upstream TLS (env)',
      () => [
        { upstream: '127.0.0.1:1' },
        { DYN_SIDECAR_UPSTREAM_SERVER_NAME: 'x' },
        'DYN_SIDECAR_UPSTREAM_SERVER_NAME has no effect without --upstream-tls or DYN_SIDECAR_UPSTREAM_TLS',
      ],
    ],
    [
      'an upstream client certificate without its key',
      () => [
        { upstream: '127.0.0.1:1', upstreamTls: 'true', upstreamCert: pki.client.certFile },
        {},
        '--upstream-cert needs --upstream-key or DYN_SIDECAR_UPSTREAM_KEY',
      ],
    ],
    [
      'an unreadable upstream CA',
      () => [{ upstream: '127.0.0.1:1', upstreamTls: 'true', upstreamCa: missing() }, {}, `--upstream-ca: "${missing()}": cannot read it (ENOENT)`],
    ],
    [
      'an upstream server name that is not a host name',
      () => [
        { upstream: '127.0.0.1:1', upstreamTls: 'true', upstreamServerName: 'engine:443' },
        {},
        '--upstream-server-name must be a host name, got "engine:443"',
      ],
    ],
    [
      'upstream TLS in demo mode',
      () => [{ upstreamTls: 'true' }, {}, "--upstream-tls needs --upstream or DYN_SIDECAR_UPSTREAM (the demo's embedded engine speaks h2c)"],
    ],
    [
      'a reload interval that is not an integer',
      () => [{}, { DYN_TLS_RELOAD_INTERVAL_MS: '1s' }, 'DYN_TLS_RELOAD_INTERVAL_MS must be an integer in 0..3600000, got "1s"'],
    ],
  ])('%s', (_name, input) => {
    const [flags, env, message] = input();
    expect(problems(flags, env)).toEqual([message]);
  });

  it('takes the TLS files from --config-file too, naming the file and line in a problem', () => {
    const file = pki.write('sidecar.env', `DYN_SIDECAR_TLS_CERT=${pki.server.certFile}\nDYN_SIDECAR_TLS_KEY=${pki.server.keyFile}\n`);
    expect(parseSidecarConfig({ configFile: file }, {}).tls.ingress).toEqual({ certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: undefined });
    const half = pki.write('half.env', `# rotated by hand\nDYN_SYSTEM_TLS_CERT=${pki.server.certFile}\n`);
    expect(problems({ configFile: half })).toEqual([`DYN_SYSTEM_TLS_CERT (${half} line 2) needs --system-tls-key or DYN_SYSTEM_TLS_KEY`]);
  });

  it('exits 2 with one line per problem, naming each flag or variable, and does not start', async () => {
    const result = await runMain(['--tls-cert', pki.server.certFile, '--tls-key', pki.client.keyFile, '--upstream-ca', pki.ca.certFile], {
      DYN_SYSTEM_TLS_CERT: join(pki.dir, 'missing.pem'),
      DYN_SYSTEM_TLS_KEY: pki.server.keyFile,
    });
    expect(result.exits).toEqual([2]);
    const lines = result.err.trim().split('\n');
    expect(lines).toEqual([
      `dynamo-sidecar: --tls-key: "${pki.client.keyFile}": the key does not belong to the certificate in "${pki.server.certFile}"`,
      `dynamo-sidecar: DYN_SYSTEM_TLS_CERT: "${join(pki.dir, 'missing.pem')}": cannot read it (ENOENT)`,
      'dynamo-sidecar: --upstream-ca has no effect without --upstream-tls or DYN_SIDECAR_UPSTREAM_TLS',
    ]);
    expect(result.out).not.toContain('listening on');
  });

  it('--help lists every TLS option with its env twin', async () => {
    const { out } = await runMain(['--help']);
    for (const [flag, env] of [
      ['--tls-cert', 'DYN_SIDECAR_TLS_CERT'],
      ['--tls-key', 'DYN_SIDECAR_TLS_KEY'],
      ['--tls-client-ca', 'DYN_SIDECAR_TLS_CLIENT_CA'],
      ['--system-tls-cert', 'DYN_SYSTEM_TLS_CERT'],
      ['--system-tls-key', 'DYN_SYSTEM_TLS_KEY'],
      ['--upstream-tls', 'DYN_SIDECAR_UPSTREAM_TLS'],
      ['--upstream-ca', 'DYN_SIDECAR_UPSTREAM_CA'],
      ['--upstream-cert', 'DYN_SIDECAR_UPSTREAM_CERT'],
      ['--upstream-key', 'DYN_SIDECAR_UPSTREAM_KEY'],
      ['--upstream-server-name', 'DYN_SIDECAR_UPSTREAM_SERVER_NAME'],
      ['--tls-reload-interval-ms', 'DYN_TLS_RELOAD_INTERVAL_MS'],
      ['--nats-creds', 'NATS_AUTH_CREDENTIALS_FILE'],
      ['--nats-tls-ca', 'DYN_NATS_TLS_CA'],
      ['--nats-tls-cert', 'DYN_NATS_TLS_CERT'],
      ['--nats-tls-key', 'DYN_NATS_TLS_KEY'],
    ]) {
      expect(out).toContain(flag);
      expect(out).toContain(env);
    }
    for (const env of ['NATS_AUTH_TOKEN', 'NATS_AUTH_USERNAME', 'NATS_AUTH_PASSWORD']) expect(out).toMatch(new RegExp(`^  ${env}  `, 'm'));
  });
});
