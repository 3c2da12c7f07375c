/** The frontend's option table: every --help default is what parseFrontendConfig gives when the option is unset. */
import { describe, expect, it } from 'vitest';
import { parseFrontendConfig, type FrontendConfig } from '../../../src/frontend/frontend-config.js';
import { FRONTEND_OPTIONS, type FrontendOptionKey } from '../../../src/frontend/options.js';
import { expectShownDefaultParsed } from '../../support/option-defaults.js';

/** Where each option lands in the config, for those not under their own name. */
const READ: Partial<Record<FrontendOptionKey, (config: FrontendConfig) => unknown>> = {
  natsUrl: (c) => c.natsServers,
  activeDecodeBlocksThreshold: (c) => c.thresholds.active_decode_blocks_threshold,
  activePrefillTokensThreshold: (c) => c.thresholds.active_prefill_tokens_threshold,
  activePrefillTokensThresholdFrac: (c) => c.thresholds.active_prefill_tokens_threshold_frac,
  // Accepted and ignored (a warning when set): nothing in the config.
  admissionControl: (c) => (c.warnings.length ? c.warnings : undefined),
  tokenizer: (c) => c.tokenizerPath,
  // One setting under two names (the older is --max-predicted-ttft-ms).
  ttftSloMs: (c) => c.maxPredictedTtftMs,
  disableAdminApi: (c) => !c.adminApi,
  tlsCert: (c) => c.tls.http?.certFile,
  tlsKey: (c) => c.tls.http?.keyFile,
  tlsClientCa: (c) => c.tls.http?.caFile,
  workerTls: (c) => c.tls.workers !== undefined,
  workerCa: (c) => c.tls.workers?.caFile,
  workerCert: (c) => c.tls.workers?.certFile,
  workerKey: (c) => c.tls.workers?.keyFile,
  workerServerName: (c) => c.tls.workers?.serverName,
  tlsReloadIntervalMs: (c) => c.tls.reloadIntervalMs,
  natsCreds: (c) => c.natsSecurity.auth,
  natsToken: (c) => c.natsSecurity.auth,
  natsUser: (c) => c.natsSecurity.auth,
  natsPassword: (c) => c.natsSecurity.auth,
  natsTlsCa: (c) => c.natsSecurity.tls?.caFile,
  natsTlsCert: (c) => c.natsSecurity.tls?.certFile,
  natsTlsKey: (c) => c.natsSecurity.tls?.keyFile,
};

function parsedValue(key: FrontendOptionKey): unknown {
  const config = parseFrontendConfig({}, {});
  const read = READ[key];
  if (read) return read(config);
  if (!(key in config)) throw new Error(`option ${key} is not in the parsed config`);
  return (config as unknown as Record<string, unknown>)[key];
}

describe('frontend option table', () => {
  it.each(Object.keys(FRONTEND_OPTIONS) as FrontendOptionKey[])('%s: --help shows the default the parser gives when unset', (key) => {
    expectShownDefaultParsed(FRONTEND_OPTIONS[key], parsedValue(key));
  });

  it('every option has an env twin of its own', () => {
    const envs = Object.values(FRONTEND_OPTIONS).map((spec) => spec.env);
    expect(new Set(envs).size).toBe(envs.length);
  });
});
