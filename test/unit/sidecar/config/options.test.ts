/** The sidecar's option table: every --help default is what parseSidecarConfig gives when the option is unset. */
import { describe, expect, it } from 'vitest';
import { SIDECAR_OPTIONS, type SidecarOptionKey } from '../../../../src/sidecar/config/options.js';
import { parseSidecarConfig, type SidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { expectShownDefaultParsed } from '../../../support/option-defaults.js';

/** Where an option lands in the config when its name there differs. */
const RENAMED: Partial<Record<SidecarOptionKey, string>> = { natsUrl: 'natsServers' };

/** Options that land inside a structure of the config (TLS, NATS security). */
const READ: Partial<Record<SidecarOptionKey, (config: SidecarConfig) => unknown>> = {
  tlsCert: (c) => c.tls.ingress?.certFile,
  tlsKey: (c) => c.tls.ingress?.keyFile,
  tlsClientCa: (c) => c.tls.ingress?.caFile,
  systemTlsCert: (c) => c.tls.system?.certFile,
  systemTlsKey: (c) => c.tls.system?.keyFile,
  upstreamTls: (c) => c.tls.upstream !== undefined,
  upstreamCa: (c) => c.tls.upstream?.caFile,
  upstreamCert: (c) => c.tls.upstream?.certFile,
  upstreamKey: (c) => c.tls.upstream?.keyFile,
  upstreamServerName: (c) => c.tls.upstream?.serverName,
  tlsReloadIntervalMs: (c) => c.tls.reloadIntervalMs,
  natsCreds: (c) => c.load.natsSecurity.auth,
  natsToken: (c) => c.load.natsSecurity.auth,
  natsUser: (c) => c.load.natsSecurity.auth,
  natsPassword: (c) => c.load.natsSecurity.auth,
  natsTlsCa: (c) => c.load.natsSecurity.tls?.caFile,
  natsTlsCert: (c) => c.load.natsSecurity.tls?.certFile,
  natsTlsKey: (c) => c.load.natsSecurity.tls?.keyFile,
};

function parsedValue(key: SidecarOptionKey): unknown {
  const config = parseSidecarConfig({}, {});
  const read = READ[key];
  if (read) return read(config);
  const name = RENAMED[key] ?? key;
  for (const part of [config, config.connections, config.load] as object[]) {
    if (name in part) return (part as Record<string, unknown>)[name];
  }
  throw new Error(`option ${key} is not in the parsed config`);
}

describe('sidecar option table', () => {
  it.each(Object.keys(SIDECAR_OPTIONS) as SidecarOptionKey[])('%s: --help shows the default the parser gives when unset', (key) => {
    expectShownDefaultParsed(SIDECAR_OPTIONS[key], parsedValue(key));
  });

  it('every option has an env twin of its own', () => {
    const envs = Object.values(SIDECAR_OPTIONS).map((spec) => spec.env);
    expect(new Set(envs).size).toBe(envs.length);
  });
});
