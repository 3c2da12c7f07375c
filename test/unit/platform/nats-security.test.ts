/**
 * NATS TLS and authentication settings, shared by the sidecar and the frontend: Dynamo's
 * NATS_AUTH_* variables, one authentication at most, files checked at startup, secrets never in
 * a problem line, a log line, JSON or inspect output; and what nats.js is handed (the
 * credentials file read again at each connection).
 */
import { inspect } from 'node:util';
import { nkeys } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { describeNatsSecurity, natsConnectionSecurity, NO_NATS_SECURITY } from '../../../src/platform/nats-security.js';
import { parseSidecarConfig } from '../../../src/sidecar/config/sidecar-config.js';
import { fixturePki, type TestPki } from '../../support/fixture-pki.js';
import { problems, problemsOf } from '../../support/config-problems.js';
import { runMain } from '../../support/run-main.js';

const NATS = { NATS_SERVER: 'nats://127.0.0.1:4222' };
const TOKEN = 's3cr3t-t0ken-value';

let pki: TestPki;

beforeAll(() => {
  pki = fixturePki();
});

afterAll(() => pki?.remove());

function credsFile(name: string, jwt: string): { path: string; publicKey: string } {
  const user = nkeys.createUser();
  const seed = new TextDecoder().decode(user.getSeed());
  const text = `-----BEGIN NATS USER JWT-----\n${jwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`;
  return { path: pki.write(name, text), publicKey: user.getPublicKey() };
}

describe('NATS security settings', () => {
  it('are not read at all without a NATS server (Dynamo processes in the pod may share the variables)', () => {
    const env = { NATS_AUTH_TOKEN: TOKEN, NATS_AUTH_CREDENTIALS_FILE: '/nowhere', DYN_NATS_TLS_CA: '/nowhere' };
    expect(parseSidecarConfig({}, env).load.natsSecurity).toBe(NO_NATS_SECURITY);
    expect(parseFrontendConfig({ workers: ['127.0.0.1:1'] }, env).natsSecurity).toBe(NO_NATS_SECURITY);
  });

  it('take a token from NATS_AUTH_TOKEN that no JSON, inspect or describe output shows', async () => {
    const config = parseSidecarConfig({}, { ...NATS, NATS_AUTH_TOKEN: TOKEN });
    const security = config.load.natsSecurity;
    expect(security.auth?.kind).toBe('token');
    expect(JSON.stringify(config)).not.toContain(TOKEN);
    expect(inspect(config, { depth: 10 })).not.toContain(TOKEN);
    expect(JSON.stringify(describeNatsSecurity(security))).not.toContain(TOKEN);
    expect(describeNatsSecurity(security)).toEqual({ nats_auth: 'token' });
    const auth = (await natsConnectionSecurity(security)).authenticator as (nonce?: string) => unknown;
    expect(auth()).toEqual({ auth_token: TOKEN });
  });

  it('take a user and password from NATS_AUTH_USERNAME and NATS_AUTH_PASSWORD (the frontend too)', async () => {
    const security = parseFrontendConfig({}, { ...NATS, NATS_AUTH_USERNAME: 'svc', NATS_AUTH_PASSWORD: 'pw with spaces ' }).natsSecurity;
    expect(security.auth).toMatchObject({ kind: 'user', user: 'svc' });
    const auth = (await natsConnectionSecurity(security)).authenticator as (nonce?: string) => unknown;
    expect(auth()).toEqual({ user: 'svc', pass: 'pw with spaces ' });
  });

  it('read the credentials file at every connection, so a rotated file is used from the next one', async () => {
    const first = credsFile('user.creds', 'jwt.one.x');
    const security = parseSidecarConfig({ natsCreds: first.path }, NATS).load.natsSecurity;
    expect(security.auth).toEqual({ kind: 'creds', file: first.path });
    const auth = (await natsConnectionSecurity(security)).authenticator as (nonce?: string) => { jwt: string; nkey: string; sig: string };
    expect(auth('nonce-1')).toMatchObject({ jwt: 'jwt.one.x', nkey: first.publicKey });
    const second = credsFile('user.creds', 'jwt.two.x');
    const signed = auth('nonce-2');
    expect(signed).toMatchObject({ jwt: 'jwt.two.x', nkey: second.publicKey });
    expect(nkeys.fromPublic(second.publicKey).verify(new TextEncoder().encode('nonce-2'), Buffer.from(signed.sig, 'base64url'))).toBe(true);
  });

  it('hand nats.js the TLS files, which makes TLS required', async () => {
    const security = parseSidecarConfig(
      { natsTlsCa: pki.ca.certFile, natsTlsCert: pki.client.certFile, natsTlsKey: pki.client.keyFile },
      { NATS_SERVER: 'tls://127.0.0.1:4222' },
    ).load.natsSecurity;
    expect(await natsConnectionSecurity(security)).toEqual({ tls: { caFile: pki.ca.certFile, certFile: pki.client.certFile, keyFile: pki.client.keyFile } });
    expect(describeNatsSecurity(security)).toEqual({ nats_tls: 'on, client certificate' });
    expect(await natsConnectionSecurity(parseSidecarConfig({}, { ...NATS, DYN_NATS_TLS_CA: pki.ca.certFile }).load.natsSecurity)).toEqual({
      tls: { caFile: pki.ca.certFile },
    });
  });

  it.each<[string, () => [Record<string, string>, Record<string, string>, string]]>([
    [
      'two authentications',
      () => [{}, { ...NATS, NATS_AUTH_TOKEN: TOKEN, NATS_AUTH_USERNAME: 'u' }, 'NATS_AUTH_TOKEN, NATS_AUTH_USERNAME: give one NATS authentication, not 2'],
    ],
    [
      'a credentials file and a token',
      () => [{ natsCreds: pki.ca.certFile }, { ...NATS, NATS_AUTH_TOKEN: TOKEN }, '--nats-creds, NATS_AUTH_TOKEN: give one NATS authentication, not 2'],
    ],
    ['a user without a password', () => [{}, { ...NATS, NATS_AUTH_USERNAME: 'u' }, 'NATS_AUTH_USERNAME needs NATS_AUTH_PASSWORD']],
    ['a password without a user', () => [{}, { ...NATS, NATS_AUTH_PASSWORD: TOKEN }, 'NATS_AUTH_PASSWORD needs NATS_AUTH_USERNAME']],
    [
      'an unreadable credentials file',
      () => [
        {},
        { ...NATS, NATS_AUTH_CREDENTIALS_FILE: `${pki.dir}/none.creds` },
        `NATS_AUTH_CREDENTIALS_FILE: "${pki.dir}/none.creds": cannot read it (ENOENT)`,
      ],
    ],
    [
      'a file that is not a credentials file',
      () => [
        { natsCreds: pki.ca.certFile },
        NATS,
        `--nats-creds: "${pki.ca.certFile}" is not a NATS credentials file (expected a NATS USER JWT and a USER NKEY SEED block)`,
      ],
    ],
    [
      'a NATS client certificate without its key',
      () => [{ natsTlsCert: pki.client.certFile }, NATS, '--nats-tls-cert needs --nats-tls-key or DYN_NATS_TLS_KEY'],
    ],
    [
      'a NATS client key that does not match (env)',
      () => [
        {},
        { ...NATS, DYN_NATS_TLS_CERT: pki.client.certFile, DYN_NATS_TLS_KEY: pki.server.keyFile },
        `DYN_NATS_TLS_KEY: "${pki.server.keyFile}": the key does not belong to the certificate in "${pki.client.certFile}"`,
      ],
    ],
  ])('refuse %s, naming the settings and never a secret', (_name, input) => {
    const [flags, env, message] = input();
    const found = problems(flags, env);
    expect(found).toEqual([message]);
    expect(problemsOf(() => parseFrontendConfig(flags, env))).toEqual([message]);
    expect(found.join('\n')).not.toContain(TOKEN);
  });

  it('a bad setting exits 2 and the token appears nowhere in the output', async () => {
    const result = await runMain(['--nats-url', 'nats://127.0.0.1:4222'], { NATS_AUTH_TOKEN: TOKEN, NATS_AUTH_PASSWORD: TOKEN });
    expect(result.exits).toEqual([2]);
    expect(result.err).toContain('NATS_AUTH_TOKEN, NATS_AUTH_PASSWORD: give one NATS authentication, not 2');
    expect(result.err + result.out).not.toContain(TOKEN);
  });
});
