/**
 * How the NATS clients (the sidecar's publisher, the frontend's load source) prove who they are
 * and check the server: TLS files and one authentication, as one option-table slice both
 * commands spread into their tables, and what nats.js takes for them.
 *
 * Names: the credentials, token, user and password use NVIDIA Dynamo's own variables
 * (NATS_AUTH_CREDENTIALS_FILE, NATS_AUTH_TOKEN, NATS_AUTH_USERNAME, NATS_AUTH_PASSWORD; its
 * lib/runtime/src/transports/nats.rs), so one Kubernetes secret serves Dynamo's processes and
 * ours. Secrets are environment-only (a flag would show in `ps` and in the pod spec), held as
 * Secret and never logged. Dynamo picks the first set by a fixed order; we refuse two at once.
 *
 * Files are read by nats.js at each (re)connection (TLS: its caFile/certFile/keyFile; the
 * credentials: our authenticator), so a rotated file is used from the next connection on and the
 * connection in place is not touched. Without a NATS server configured these settings are not
 * read at all: Dynamo processes in the same pod may share the variables.
 */
import { readFileSync } from 'node:fs';
import type { NodeConnectionOptions } from '@nats-io/transport-node';
import type { OptionReader } from './config/option-reader.js';
import type { OptionSpec } from './config/option-spec.js';
import { Secret } from './config/secret.js';
import { readClientTls, type ClientTlsConfig } from './tls/tls-options.js';

export const NATS_SECURITY_OPTIONS = {
  natsCreds: {
    flag: '--nats-creds <file>',
    env: 'NATS_AUTH_CREDENTIALS_FILE',
    defaultText: 'none',
    help: 'NATS credentials file (user JWT and nkey seed, as nsc writes it); read at every (re)connection, so a rotated file is used from the next one',
  },
  natsTlsCa: {
    flag: '--nats-tls-ca <file>',
    env: 'DYN_NATS_TLS_CA',
    defaultText: 'the system CAs',
    help: 'CA bundle (PEM) the NATS server certificate must chain to. Any NATS TLS setting makes TLS required (a server without TLS is refused)',
  },
  natsTlsCert: {
    flag: '--nats-tls-cert <file>',
    env: 'DYN_NATS_TLS_CERT',
    defaultText: 'none',
    help: 'client certificate chain (PEM) for a NATS server that verifies clients (mTLS); needs --nats-tls-key',
  },
  natsTlsKey: { flag: '--nats-tls-key <file>', env: 'DYN_NATS_TLS_KEY', defaultText: 'none', help: 'unencrypted PEM private key of --nats-tls-cert' },
  natsToken: { env: 'NATS_AUTH_TOKEN', help: 'NATS token authentication (never logged)' },
  natsUser: { env: 'NATS_AUTH_USERNAME', help: 'NATS user name, with NATS_AUTH_PASSWORD' },
  natsPassword: { env: 'NATS_AUTH_PASSWORD', help: 'password of NATS_AUTH_USERNAME (never logged)' },
} as const satisfies Record<string, OptionSpec>;

export type NatsAuth =
  | { readonly kind: 'creds'; readonly file: string }
  | { readonly kind: 'token'; readonly token: Secret }
  | { readonly kind: 'user'; readonly user: string; readonly password: Secret };

export interface NatsSecurity {
  /** TLS settings (TLS then required); undefined: nats.js uses TLS, with the system CAs, only when the server requires or offers it. */
  readonly tls: ClientTlsConfig | undefined;
  /** undefined: none (nats.js ignores credentials in a server URL). */
  readonly auth: NatsAuth | undefined;
}

export const NO_NATS_SECURITY: NatsSecurity = Object.freeze({ tls: undefined, auth: undefined });

type Specs = Readonly<Record<string, OptionSpec>> & typeof NATS_SECURITY_OPTIONS;

/** The NATS security settings, checked; NO_NATS_SECURITY when no NATS server is configured. */
export function parseNatsSecurity<S extends Specs>(read: OptionReader<S>, natsConfigured: boolean): NatsSecurity {
  if (!natsConfigured) return NO_NATS_SECURITY;
  const tls = readClientTls(read, { ca: 'natsTlsCa', cert: 'natsTlsCert', key: 'natsTlsKey' });
  const creds = read.raw('natsCreds');
  const token = read.raw('natsToken');
  const user = read.raw('natsUser');
  const password = read.raw('natsPassword');
  const methods = [creds, token, user ?? password].filter((found) => found !== undefined);
  if (methods.length > 1) {
    read.report(methods.map((found) => found.source).join(', '), `: give one NATS authentication, not ${methods.length}`);
    return Object.freeze({ tls, auth: undefined });
  }
  if ((user === undefined) !== (password === undefined)) {
    if (user) read.report(user.source, `needs ${read.names('natsPassword')}`);
    else read.report(password!.source, `needs ${read.names('natsUser')}`);
    return Object.freeze({ tls, auth: undefined });
  }
  let auth: NatsAuth | undefined;
  if (creds) auth = checkedCreds(read, creds);
  else if (token) auth = { kind: 'token', token: new Secret(token.value.trim()) };
  else if (user && password) auth = { kind: 'user', user: user.value.trim(), password: new Secret(password.value) };
  return Object.freeze({ tls, auth: auth && Object.freeze(auth) });
}

/**
 * The parts of nats.js's connection options these settings give. nats.js is loaded here, on the
 * first connection, not at startup: a worker without NATS does not carry it (about 5 MB of RSS).
 */
export async function natsConnectionSecurity(security: NatsSecurity): Promise<Pick<NodeConnectionOptions, 'tls' | 'authenticator'>> {
  const { credsAuthenticator, tokenAuthenticator, usernamePasswordAuthenticator } = await import('@nats-io/transport-node');
  const { tls, auth } = security;
  const options: Pick<NodeConnectionOptions, 'tls' | 'authenticator'> = {};
  if (tls) {
    options.tls = {
      ...(tls.caFile === undefined ? {} : { caFile: tls.caFile }),
      ...(tls.certFile === undefined || tls.keyFile === undefined ? {} : { certFile: tls.certFile, keyFile: tls.keyFile }),
    };
  }
  if (auth?.kind === 'creds') options.authenticator = credsAuthenticator(() => readFileSync(auth.file));
  else if (auth?.kind === 'token') options.authenticator = tokenAuthenticator(() => auth.token.reveal());
  else if (auth?.kind === 'user') options.authenticator = usernamePasswordAuthenticator(auth.user, () => auth.password.reveal());
  return options;
}

/** What a log line may say about the settings: the kinds and files, never a secret. */
export function describeNatsSecurity(security: NatsSecurity): Record<string, string> {
  const fields: Record<string, string> = {};
  if (security.tls) fields['nats_tls'] = security.tls.certFile === undefined ? 'on' : 'on, client certificate';
  if (security.auth) fields['nats_auth'] = security.auth.kind;
  return fields;
}

function checkedCreds<S extends Specs>(read: OptionReader<S>, found: { value: string; source: string }): NatsAuth | undefined {
  const file = found.value.trim();
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    read.report(found.source, `: "${file}": cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    return undefined;
  }
  if (!/-----BEGIN NATS USER JWT-----/.test(text) || !/-----BEGIN USER NKEY SEED-----/.test(text)) {
    read.report(found.source, `: "${file}" is not a NATS credentials file (expected a NATS USER JWT and a USER NKEY SEED block)`);
    return undefined;
  }
  return { kind: 'creds', file };
}
