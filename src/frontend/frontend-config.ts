/**
 * Parses the frontend's flags and environment into one typed, frozen FrontendConfig, collecting
 * every problem before failing (ConfigError, exit 2), with the same reader as the sidecar. Values
 * that Dynamo tolerates with a warning (--admission-control, a bad overload status) produce
 * `warnings` for the command to log, not errors.
 */
import { parseHostPort, formatHostPort, type HostPort } from '../platform/config/host-port.js';
import { OptionReader, parseNatsServers, type Env } from '../platform/config/option-reader.js';
import type { LogLevel } from '../platform/log.js';
import { parseNatsSecurity, type NatsSecurity } from '../platform/nats-security.js';
import { readClientTls, readServerTls, type ClientTlsConfig, type ServerTlsConfig } from '../platform/tls/tls-options.js';
import type { PriorityScales, Thresholds } from './routing/contracts.js';
import { MAX_PREDICTED_TTFT_MS } from './routing/load-report.js';
import { NO_PRIORITY_SCALES, parsePriorityScaleList } from './routing/priority-classes.js';
import { parsePriority } from '../protocol/request-class.js';
import { ROUTER_MODES, type RouterMode } from './routing/router.js';
import { FRONTEND_OPTIONS, type FrontendOptionKey, type FrontendRawFlags } from './options.js';

export interface FrontendConfig {
  readonly httpHost: string;
  readonly httpPort: number;
  /** --worker addresses ("host:port"), whose sidecars push their load. */
  readonly workers: readonly string[];
  /** `undefined`: no NATS source. */
  readonly natsServers: readonly string[] | undefined;
  /** TLS files and authentication of the NATS connection. */
  readonly natsSecurity: NatsSecurity;
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
  readonly routerMode: RouterMode;
  readonly routerTrackOutputBlocks: boolean;
  readonly kvBlockSize: number;
  /** Flag/env thresholds: apply to every model until the API changes one model's. */
  readonly thresholds: Thresholds;
  /** The fourth busy check (ours; flag/env only, every model): null = off. */
  readonly maxPredictedTtftMs: number | null;
  /** Priority classes of every model until the API sets a model's own; empty: every priority at scale 1. */
  readonly priorityThresholdScale: PriorityScales;
  /** Priority of requests that give none. */
  readonly defaultPriority: number;
  /** Requests in flight per tenant; 0: no cap. */
  readonly tenantMaxInflight: number;
  /** Tenants with a metrics label of their own. */
  readonly metricsMaxTenants: number;
  readonly overloadStatus: number;
  readonly retryAfterS: number;
  readonly overloadLeaseMs: number;
  readonly loadHeartbeatMs: number;
  readonly maxWorkers: number;
  /** `undefined`: the simulated engine's whitespace tokenizer. */
  readonly tokenizerPath: string | undefined;
  readonly maxBodyBytes: number;
  /** The workers' gRPC message limit: prompts whose Generate message would be larger get 413. */
  readonly workerMaxMessageBytes: number;
  /** 0: prompts are tokenized on the event loop. */
  readonly tokenizerThreads: number;
  readonly adminApi: boolean;
  /** `undefined`: the admin API shares the HTTP port. */
  readonly adminAddress: HostPort | undefined;
  /** Deadline of each worker call; undefined: none. */
  readonly requestTimeoutMs: number | undefined;
  /** On shutdown, requests in progress get this long before their connections are closed. */
  readonly shutdownGraceMs: number;
  /** Time to receive a whole request (node's requestTimeout); 0: none. */
  readonly httpReceiveTimeoutMs: number;
  /** Time to receive a request's headers (node's headersTimeout), at most httpReceiveTimeoutMs; 0: none. */
  readonly httpHeadersTimeoutMs: number;
  /** Client connections per HTTP listener; 0: no cap. */
  readonly httpMaxConnections: number;
  readonly logLevel: LogLevel;
  readonly tls: FrontendTlsConfig;
  /** Accepted-but-ignored settings and fallbacks, to log at startup. */
  readonly warnings: readonly string[];
}

/** TLS of the listeners and of the worker connections (docs/operations/tls.md); undefined: plaintext. */
export interface FrontendTlsConfig {
  /** The HTTP server and the admin listener (with `caFile`: mTLS). */
  readonly http: ServerTlsConfig | undefined;
  /** gRPC to the sidecars: Generate calls and WorkerLoad pushes. */
  readonly workers: ClientTlsConfig | undefined;
  /** Between two reads of the certificate files; 0: never. */
  readonly reloadIntervalMs: number;
}

/** The typed defaults live in the option table (options.ts); this one is also the fallback for a bad status. */
const DEFAULT_OVERLOAD_STATUS: number = FRONTEND_OPTIONS.overloadStatus.default;
const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export function parseFrontendConfig(flags: FrontendRawFlags, env: Env): FrontendConfig {
  const { workers, ...scalarFlags } = flags;
  const read: Reader = new OptionReader(scalarFlags, env, FRONTEND_OPTIONS);
  const warnings: string[] = [];
  const admission = read.raw('admissionControl');
  if (admission) warnings.push(`${admission.source}=${admission.value} has no effect and is ignored: busy rejection is on exactly when a threshold is set`);

  const maxBodyBytes = read.integer('maxBodyBytes', 1024, 1 << 30);
  // gRPC lengths are int32; below 64 KiB a worker could not take a long conversation.
  const workerMaxMessageBytes = read.integer('workerMaxMessageBytes', 64 * 1024, 2 ** 31 - 1);
  if (maxBodyBytes > workerMaxMessageBytes / 2) {
    warnings.push(
      `a body limit (${maxBodyBytes} bytes) over half the workers' message limit (${workerMaxMessageBytes} bytes) admits prompts whose Generate message may not fit: those get 413 once tokenized`,
    );
  }

  const config: FrontendConfig = {
    httpHost: read.string('httpHost'),
    httpPort: read.integer('httpPort', 0, 65535),
    workers: parseWorkers(read, workers),
    natsServers: parseNatsServers(read),
    natsSecurity: parseNatsSecurity(read, read.raw('natsUrl') !== undefined),
    namespace: read.string('namespace'),
    component: read.string('component'),
    endpoint: read.string('endpoint'),
    routerMode: read.choice('routerMode', ROUTER_MODES),
    routerTrackOutputBlocks: read.boolean('routerTrackOutputBlocks'),
    kvBlockSize: read.integer('kvBlockSize', 1, 1 << 20),
    thresholds: Object.freeze({
      active_decode_blocks_threshold: threshold(read, 'activeDecodeBlocksThreshold', 'fraction'),
      active_prefill_tokens_threshold: threshold(read, 'activePrefillTokensThreshold', 'integer'),
      active_prefill_tokens_threshold_frac: threshold(read, 'activePrefillTokensThresholdFrac', 'non-negative'),
    }),
    maxPredictedTtftMs: ttftSlo(read),
    priorityThresholdScale: priorityThresholdScale(read),
    defaultPriority: defaultPriority(read),
    tenantMaxInflight: read.integer('tenantMaxInflight', 0, 1_000_000),
    metricsMaxTenants: read.integer('metricsMaxTenants', 0, 10_000),
    overloadStatus: overloadStatus(read, warnings),
    retryAfterS: read.integer('retryAfterS', 0, 86_400),
    overloadLeaseMs: read.integer('overloadLeaseMs', 1, 3_600_000),
    loadHeartbeatMs: read.integer('loadHeartbeatMs', 10, 3_600_000),
    maxWorkers: read.integer('maxWorkers', 1, 1_000_000),
    tokenizerPath: read.raw('tokenizer')?.value.trim() || undefined,
    maxBodyBytes,
    workerMaxMessageBytes,
    tokenizerThreads: read.integer('tokenizerThreads', 0, 64),
    adminApi: !read.boolean('disableAdminApi'),
    adminAddress: read.hostPort('adminAddress', true),
    // 0 = none, as unset.
    requestTimeoutMs: read.integer('requestTimeoutMs', 0, 86_400_000) || undefined,
    shutdownGraceMs: read.integer('shutdownGraceMs', 0, 3_600_000),
    ...httpTimeouts(read),
    httpMaxConnections: read.integer('httpMaxConnections', 0, 1_000_000),
    logLevel: read.choice('logLevel', LOG_LEVELS),
    tls: Object.freeze({
      http: readServerTls(read, { cert: 'tlsCert', key: 'tlsKey', clientCa: 'tlsClientCa' }),
      workers: readClientTls(read, { enabled: 'workerTls', ca: 'workerCa', cert: 'workerCert', key: 'workerKey', serverName: 'workerServerName' }),
      reloadIntervalMs: read.integer('tlsReloadIntervalMs', 0, 3_600_000),
    }),
    warnings: Object.freeze(warnings),
  };
  read.check('ERR_FRONTEND_CONFIG');
  return Object.freeze(config);
}

type Reader = OptionReader<typeof FRONTEND_OPTIONS>;

/** A threshold: unset or "None" -> null (check off); else a number in the kind's range. */
function threshold(read: Reader, key: FrontendOptionKey, kind: 'fraction' | 'integer' | 'non-negative'): number | null {
  const found = read.raw(key);
  if (!found || found.value.trim().toLowerCase() === 'none') return null;
  const text = found.value.trim();
  const value = kind === 'integer' ? (/^\d+$/.test(text) ? Number(text) : NaN) : /^\d*\.?\d+(?:[eE][-+]?\d+)?$/.test(text) ? Number(text) : NaN;
  const ok = Number.isFinite(value) && value >= 0 && (kind !== 'fraction' || value <= 1) && (kind !== 'integer' || Number.isSafeInteger(value));
  if (ok) return value;
  const expected = { fraction: 'a number in 0..1', integer: 'an integer >= 0', 'non-negative': 'a number >= 0' }[kind];
  read.report(found.source, `must be ${expected} or "None", got "${found.value}"`);
  return null;
}

/**
 * node refuses a headers timeout longer than the request's (http.createServer throws): one given
 * so is reported naming its flag; the default one shrinks to a shorter receive timeout, as node's
 * own default does.
 */
function httpTimeouts(read: Reader): Pick<FrontendConfig, 'httpReceiveTimeoutMs' | 'httpHeadersTimeoutMs'> {
  const receive = read.integer('httpReceiveTimeoutMs', 0, 3_600_000);
  const headers = read.integer('httpHeadersTimeoutMs', 0, 3_600_000);
  if (receive === 0 || headers <= receive) return { httpReceiveTimeoutMs: receive, httpHeadersTimeoutMs: headers };
  const given = read.raw('httpHeadersTimeoutMs');
  // A value refused as such has been reported already, and reads as the default.
  if (given && String(headers) === given.value.trim()) {
    read.report(given.source, `must be at most ${read.names('httpReceiveTimeoutMs')} (${receive}), got "${given.value}"`);
  }
  return { httpReceiveTimeoutMs: receive, httpHeadersTimeoutMs: receive };
}

function priorityThresholdScale(read: Reader): PriorityScales {
  const found = read.raw('priorityThresholdScale');
  if (!found) return NO_PRIORITY_SCALES;
  const parsed = parsePriorityScaleList(found.value);
  if ('problem' in parsed) {
    read.report(found.source, `: ${parsed.problem}`);
    return NO_PRIORITY_SCALES;
  }
  return parsed;
}

/** An int32, negative too (the reader's integer() takes digits only). */
function defaultPriority(read: Reader): number {
  const found = read.raw('defaultPriority');
  if (!found) return FRONTEND_OPTIONS.defaultPriority.default;
  const parsed = parsePriority(found.value);
  if (typeof parsed === 'number') return parsed;
  read.report(found.source, `: ${parsed.problem}`);
  return FRONTEND_OPTIONS.defaultPriority.default;
}

/** Dynamo's rule: 200-999 accepted; 1xx, unparseable or out of range -> 529, with a warning. */
function overloadStatus(read: Reader, warnings: string[]): number {
  const found = read.raw('overloadStatus');
  if (!found) return DEFAULT_OVERLOAD_STATUS;
  const text = found.value.trim();
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (value >= 200 && value <= 999) return value;
  warnings.push(`${found.source}="${found.value}" is not an HTTP status in 200-999; using ${DEFAULT_OVERLOAD_STATUS}`);
  return DEFAULT_OVERLOAD_STATUS;
}

function parseWorkers(read: Reader, flagValues: readonly string[] | undefined): readonly string[] {
  const spec = FRONTEND_OPTIONS.workers;
  const fromFlags = flagValues !== undefined && flagValues.length > 0;
  const values = fromFlags ? flagValues.flatMap((v) => v.split(',')) : (read.raw('workers')?.value.split(',') ?? []);
  const source = fromFlags ? '--worker' : spec.env;
  const addresses: string[] = [];
  for (const value of values.map((v) => v.trim()).filter(Boolean)) {
    const parsed = parseHostPort(value, false);
    if (typeof parsed === 'string') read.report(source, `: ${parsed}`);
    else {
      const address = formatHostPort(parsed);
      if (!addresses.includes(address)) addresses.push(address);
    }
  }
  return Object.freeze(addresses);
}

/** --ttft-slo-ms, or its older name --max-predicted-ttft-ms (0 = off, as unset); both given must agree. */
function ttftSlo(read: Reader): number | null {
  const slo = read.integer('ttftSloMs', 1, MAX_PREDICTED_TTFT_MS);
  const older = read.integer('maxPredictedTtftMs', 0, MAX_PREDICTED_TTFT_MS) || null;
  if (slo !== undefined && older !== null && slo !== older) {
    read.report(
      read.raw('ttftSloMs')!.source,
      ` and ${read.raw('maxPredictedTtftMs')!.source} are one setting (the older name) and disagree: ${slo} vs ${older}`,
    );
  }
  return slo ?? older;
}
