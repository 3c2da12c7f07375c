/**
 * Parses flags and environment into one typed, frozen SidecarConfig, collecting every problem
 * before failing (ConfigError). Sources are injected so tests need no real environment.
 * An empty environment variable counts as unset, as compose files use `VAR=` to clear one.
 */
import { ENGINE_PATHS, GENERATE_WIRES, type GenerateWire } from '../../protocol/engine/generate-wire.js';
import { ENGINE_METRICS_FORMATS, type EngineMetricsFormatOption } from '../../protocol/engine/metrics-formats.js';
import { EVENT_FORMATS, type EventFormat } from '../../protocol/dynamo-event.js';
import type { LogLevel } from '../../platform/log.js';
import { MAX_TIMER_MS } from '../../protocol/grpc/deadline.js';
import { MAX_PRIORITY, MAX_SLO_TTFT_MS, MIN_PRIORITY } from '../../protocol/request-class.js';
import { isUnspecifiedHost } from './advertise-address.js';
import { type HostPort } from '../../platform/config/host-port.js';
import { CAPACITY_BOUNDS, SIDECAR_OPTIONS, type RawFlags, type SidecarOptionKey } from './options.js';
import { OptionReader, parseNatsServers, type Env } from '../../platform/config/option-reader.js';
import { readFileSync } from 'node:fs';
import { fromFile, readConfigFile } from './config-file.js';
import { parseNatsSecurity, type NatsSecurity } from '../../platform/nats-security.js';
import { readClientTls, readServerTls, type ClientTlsConfig, type ServerTlsConfig } from '../../platform/tls/tls-options.js';

export interface SidecarConfig {
  readonly listen: HostPort;
  /**
   * What frontends dial (grpc_address in load events); `undefined`: derived from the listen host
   * and the machine's interfaces (advertise-address.ts). Port 0: the port actually bound.
   */
  readonly advertiseAddress: HostPort | undefined;
  /** `undefined`: start the embedded simulated engine (demo mode). */
  readonly upstream: HostPort | undefined;
  readonly systemHost: string;
  readonly systemPort: number;
  /** `undefined`: admission off. With `engineRequestLimitAuto`, AUTO_FALLBACK_LIMIT until the engine tells its capacity. */
  readonly engineRequestLimit: number | undefined;
  /** `--engine-request-limit auto`: N from the engine's GetLoads (engine-capacity-probe.ts). */
  readonly engineRequestLimitAuto: boolean;
  readonly requestQueueLimit: number;
  readonly retryPushbackMs: number;
  readonly retryPushbackMode: RetryPushbackMode;
  readonly retryPushbackMinMs: number;
  readonly retryPushbackMaxMs: number;
  /** A call queued longer than this is refused (RESOURCE_EXHAUSTED); 0: no limit. */
  readonly queueTimeoutMs: number;
  readonly admissionMode: AdmissionMode;
  /** Adaptive mode: the least the engine request limit goes down to. */
  readonly adaptiveMinLimit: number;
  /** Most calls in the engine still waiting for their first token; `undefined`: no such limit. */
  readonly firstTokenLimit: number | undefined;
  /** A call whose expected queue wait exceeds this is refused at once; 0: off. */
  readonly maxQueueWaitMs: number;
  /** --ttft-slo-ms: admit by KV budget and predicted TTFT (slo-admission.ts); undefined: off. */
  readonly ttftSloMs: number | undefined;
  /** Admissions from the queue in a row that may pass over the call waiting longest. */
  readonly priorityStarvationLimit: number;
  /** The priority of a call without x-request-priority. */
  readonly defaultPriority: number;
  /** Tenants (and priority values) with a metric series of their own; the rest are `other`. */
  readonly metricsMaxTenants: number;
  readonly drainGraceMs: number;
  /** On SIGTERM: report draining and keep serving this long before refusing new calls. */
  readonly drainDelayMs: number;
  /** `undefined`: the admin API is off. A secret: never logged. */
  readonly adminToken: string | undefined;
  /** The --config-file read at start-up, `undefined` without one. */
  readonly configFile: ConfigFileSource | undefined;
  /** `undefined`: the mode's default (on in demo mode, off in front of a real engine). */
  readonly statusIntervalMs: number | undefined;
  readonly logLevel: LogLevel;
  readonly connections: ConnectionConfig;
  /** Minimum time between two /metrics renders; 0: render on every scrape. */
  readonly metricsCacheMs: number;
  readonly load: LoadConfig;
  readonly tls: SidecarTlsConfig;
}

/** TLS of each listener and client (docs/operations/tls.md); undefined: plaintext. */
export interface SidecarTlsConfig {
  /** The gRPC ingress (with `caFile`: mTLS). */
  readonly ingress: ServerTlsConfig | undefined;
  /** The system port (HTTPS). */
  readonly system: ServerTlsConfig | undefined;
  /** The engine connection. */
  readonly upstream: ClientTlsConfig | undefined;
  /** Between two reads of the certificate files; 0: never. */
  readonly reloadIntervalMs: number;
}

/** What the config file gave (values by environment name, as read) and which settings it decided. */
export interface ConfigFileSource {
  readonly path: string;
  readonly values: Readonly<Record<string, string>>;
  /** Settings whose value came from the file: set there, and by neither a flag nor the environment. */
  readonly fromFile: readonly SidecarOptionKey[];
}

/** Limits and timeouts for client connections and the engine connection. */
export interface ConnectionConfig {
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised to ingress clients. */
  readonly maxConcurrentStreams: number;
  /** Close a client connection (ingress or system port) idle this long; 0: never. */
  readonly idleTimeoutMs: number;
  /** Ingress: preface + SETTINGS within this; system port: request headers within this. */
  readonly handshakeTimeoutMs: number;
  /** HTTP/2 connections to the engine, new calls spread over them (proxy/upstream.ts). */
  readonly upstreamConnections: number;
  readonly upstreamPingIntervalMs: number;
  readonly upstreamPingTimeoutMs: number;
  readonly upstreamKeepaliveIntervalMs: number;
  readonly upstreamKeepaliveWithoutCalls: boolean;
}

/** Load tracking and load events (docs/architecture.md, "Load events"). */
export interface LoadConfig {
  readonly engineMetricsUrl: string | undefined;
  readonly engineMetricsFormat: EngineMetricsFormatOption;
  readonly engineLoadSource: EngineLoadSource;
  /** Between two reads of the engine's load, by scrape or GetLoads. */
  readonly scrapeIntervalMs: number;
  readonly generateWire: GenerateWire;
  readonly trackOutputBlocks: boolean;
  readonly kvTotalBlocks: number | undefined;
  readonly kvBlockSize: number;
  readonly maxNumBatchedTokens: number | undefined;
  readonly dataParallelSize: number;
  /** Values the operator gave (flag or env), which win over what the engine tells (EngineDiscovery). */
  readonly setByOperator: { readonly kvBlockSize: boolean; readonly dataParallelSize: boolean };
  /** The model in load events; `undefined`: asked from the engine (EngineDiscovery). */
  readonly servedModelName: string | undefined;
  /** Comma-separated NATS servers; `undefined`: no publishing. */
  readonly natsServers: readonly string[] | undefined;
  /** TLS files and authentication of the NATS connection. */
  readonly natsSecurity: NatsSecurity;
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
  /** json: our event with every field; dynamo: Dynamo's envelope around ActiveLoad (src/protocol/dynamo-event.ts). */
  readonly eventFormat: EventFormat;
  readonly loadHeartbeatMs: number;
  /** Unconfirmed publishes or unanswered PINGs for this long mean disconnected. */
  readonly natsLivenessTimeoutMs: number;
  /** `undefined`: derived from host name and listen port. */
  readonly workerId: number | undefined;
}

// The typed defaults live in the option table (options.ts); these names are for the code that
// needs one without a parsed config (classes built in tests, help text).
const D = SIDECAR_OPTIONS;
export const DEFAULT_REQUEST_QUEUE_LIMIT: number = D.requestQueueLimit.default;
export const DEFAULT_PRIORITY_STARVATION_LIMIT: number = D.priorityStarvationLimit.default;
export const DEFAULT_METRICS_MAX_TENANTS: number = D.metricsMaxTenants.default;
/** `--engine-request-limit auto`: N = ceil(this x max_num_seqs x dp ranks), Dynamo's coming admission gate's default. */
export const AUTO_LIMIT_FACTOR = 1.5;
/** `--engine-request-limit auto` before the engine has told its capacity, or when it cannot: Dynamo's own fallback. */
export const AUTO_FALLBACK_LIMIT = 10_000;
export const MIN_REQUEST_QUEUE_LIMIT = 2;
export const RETRY_PUSHBACK_MODES = ['fixed', 'adaptive'] as const;
export const ADMISSION_MODES = ['static', 'adaptive'] as const;
export type AdmissionMode = (typeof ADMISSION_MODES)[number];
export type RetryPushbackMode = (typeof RETRY_PUSHBACK_MODES)[number];
/** Shortest admin token accepted: guessing 16 random characters is out of reach, a word is not. */
export const MIN_ADMIN_TOKEN_LENGTH = 16;
/**
 * The settings that change while the sidecar runs (admin API, SIGHUP), each with the range every source is held to: flags, variables, the config file and the
 * admin API's JSON. The NULLABLE_SETTINGS may also be unset (admission off; no first-token limit).
 */
export const LIVE_SETTINGS = {
  engineRequestLimit: { min: 1, max: Number.MAX_SAFE_INTEGER },
  requestQueueLimit: { min: MIN_REQUEST_QUEUE_LIMIT, max: Number.MAX_SAFE_INTEGER },
  queueTimeoutMs: { min: 0, max: 3_600_000 },
  admissionMode: ADMISSION_MODES,
  adaptiveMinLimit: { min: 1, max: Number.MAX_SAFE_INTEGER },
  firstTokenLimit: { min: 1, max: Number.MAX_SAFE_INTEGER },
  maxQueueWaitMs: { min: 0, max: 3_600_000 },
  retryPushbackMode: RETRY_PUSHBACK_MODES,
  retryPushbackMs: { min: 0, max: 3_600_000 },
  retryPushbackMinMs: { min: 0, max: 3_600_000 },
  retryPushbackMaxMs: { min: 0, max: 3_600_000 },
} as const satisfies Partial<Record<SidecarOptionKey, { min: number; max: number } | readonly string[]>>;
export type LiveSettingKey = keyof typeof LIVE_SETTINGS;
/** Live settings that may be unset: `null` in the admin API's JSON. */
export const NULLABLE_SETTINGS: ReadonlySet<LiveSettingKey> = new Set(['engineRequestLimit', 'firstTokenLimit']);
/** The admission settings in force; the admin API and SIGHUP replace them as a whole. */
export type AdmissionSettings = Pick<SidecarConfig, LiveSettingKey>;

export function admissionSettingsOf(config: SidecarConfig): AdmissionSettings {
  const settings = {} as Record<LiveSettingKey, unknown>;
  for (const key of Object.keys(LIVE_SETTINGS) as LiveSettingKey[]) settings[key] = config[key];
  return Object.freeze(settings as unknown as AdmissionSettings);
}

/** The one rule that spans two live settings; `undefined` when they agree. */
export function pushbackBoundsProblem(settings: Pick<AdmissionSettings, 'retryPushbackMinMs' | 'retryPushbackMaxMs'>): string | undefined {
  const { retryPushbackMinMs: min, retryPushbackMaxMs: max } = settings;
  return min <= max ? undefined : `the retry pushback minimum (${min} ms) is above its maximum (${max} ms)`;
}
export const ENGINE_LOAD_SOURCES = ['scrape', 'getloads', 'traffic', 'auto'] as const;
export type EngineLoadSource = (typeof ENGINE_LOAD_SOURCES)[number];
export const DEFAULT_ENGINE_METRICS_FORMAT: EngineMetricsFormatOption = D.engineMetricsFormat.default;
export const DEFAULT_LOAD_HEARTBEAT_MS: number = D.loadHeartbeatMs.default;
export const DEFAULT_EVENT_FORMAT: EventFormat = D.eventFormat.default;
/** A burst of load changes within this becomes one NATS publish or one WorkerLoad update. */
export const LOAD_DEBOUNCE_MS = 5;
/** GetModelInfo, asked until the engine answers: one attempt at a time, this long at most, this far apart. */
export const MODEL_INFO_TIMEOUT_MS = 5000;
export const MODEL_INFO_RETRY_MS = 2000;
export const DEFAULT_KV_BLOCK_SIZE: number = D.kvBlockSize.default;
export const DEFAULT_DATA_PARALLEL_SIZE: number = D.dataParallelSize.default;
/** HTTP/2 stream counts are 31-bit (RFC 9113 section 6.5.2). */
export const MAX_MAX_CONCURRENT_STREAMS = 2 ** 31 - 1;
export const DEFAULT_IDLE_TIMEOUT_MS: number = D.idleTimeoutMs.default;
export const DEFAULT_HANDSHAKE_TIMEOUT_MS: number = D.handshakeTimeoutMs.default;
export const MIN_HANDSHAKE_TIMEOUT_MS = 100;
export const DEFAULT_UPSTREAM_CONNECTIONS: number = D.upstreamConnections.default;
export const MAX_UPSTREAM_CONNECTIONS = 64;
export const DEFAULT_UPSTREAM_PING_INTERVAL_MS: number = D.upstreamPingIntervalMs.default;
export const DEFAULT_UPSTREAM_PING_TIMEOUT_MS: number = D.upstreamPingTimeoutMs.default;
export const DEFAULT_UPSTREAM_KEEPALIVE_INTERVAL_MS: number = D.upstreamKeepaliveIntervalMs.default;
export const DEFAULT_NATS_LIVENESS_TIMEOUT_MS: number = D.natsLivenessTimeoutMs.default;
const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/**
 * `readFile` reads --config-file (injected in tests); flags and the environment win over the
 * file, which is read once here (and again on SIGHUP by whoever calls this again).
 */
export function parseSidecarConfig(flags: RawFlags, env: Env, readFile: (path: string) => string = (path) => readFileSync(path, 'utf8')): SidecarConfig {
  const file = readConfigFile(new OptionReader(flags, env, SIDECAR_OPTIONS), readFile);
  const read = new OptionReader(
    flags,
    env,
    SIDECAR_OPTIONS,
    file && { values: file.values, source: (name) => `${name} (${file.path} line ${file.lines[name]})` },
  );
  if (file) read.reportAll(file.problems);
  const config: SidecarConfig = {
    listen: read.hostPort('listen', true),
    advertiseAddress: parseAdvertiseAddress(read),
    upstream: read.hostPort('upstream', false),
    systemHost: read.string('systemHost'),
    systemPort: read.integer('systemPort', 0, 65535),
    ...parseEngineRequestLimit(read),
    // Validated even when no limit is set: a typo should not wait for the day the limit is turned on.
    requestQueueLimit: read.integer('requestQueueLimit', MIN_REQUEST_QUEUE_LIMIT, Number.MAX_SAFE_INTEGER),
    retryPushbackMs: read.integer('retryPushbackMs', LIVE_SETTINGS.retryPushbackMs.min, LIVE_SETTINGS.retryPushbackMs.max),
    retryPushbackMode: read.choice('retryPushbackMode', RETRY_PUSHBACK_MODES),
    retryPushbackMinMs: read.integer('retryPushbackMinMs', LIVE_SETTINGS.retryPushbackMinMs.min, LIVE_SETTINGS.retryPushbackMinMs.max),
    retryPushbackMaxMs: read.integer('retryPushbackMaxMs', LIVE_SETTINGS.retryPushbackMaxMs.min, LIVE_SETTINGS.retryPushbackMaxMs.max),
    queueTimeoutMs: read.integer('queueTimeoutMs', LIVE_SETTINGS.queueTimeoutMs.min, LIVE_SETTINGS.queueTimeoutMs.max),
    admissionMode: read.choice('admissionMode', ADMISSION_MODES),
    adaptiveMinLimit: read.integer('adaptiveMinLimit', LIVE_SETTINGS.adaptiveMinLimit.min, LIVE_SETTINGS.adaptiveMinLimit.max),
    firstTokenLimit: read.integer('firstTokenLimit', LIVE_SETTINGS.firstTokenLimit.min, LIVE_SETTINGS.firstTokenLimit.max),
    maxQueueWaitMs: read.integer('maxQueueWaitMs', LIVE_SETTINGS.maxQueueWaitMs.min, LIVE_SETTINGS.maxQueueWaitMs.max),
    ttftSloMs: read.integer('ttftSloMs', 1, MAX_SLO_TTFT_MS),
    priorityStarvationLimit: read.integer('priorityStarvationLimit', 1, 1_000_000),
    defaultPriority: read.integer('defaultPriority', MIN_PRIORITY, MAX_PRIORITY),
    metricsMaxTenants: read.integer('metricsMaxTenants', 0, 10_000),
    drainGraceMs: read.integer('drainGraceMs', 0, 3_600_000),
    drainDelayMs: read.integer('drainDelayMs', 0, 3_600_000),
    adminToken: parseAdminToken(read),
    configFile: file && Object.freeze({ path: file.path, values: file.values, fromFile: Object.freeze(fromFile(read, flags, env, file.values)) }),
    statusIntervalMs: read.integer('statusIntervalMs', 0, 3_600_000),
    logLevel: read.choice('logLevel', LOG_LEVELS),
    connections: Object.freeze(parseConnectionConfig(read)),
    metricsCacheMs: read.integer('metricsCacheMs', 0, 600_000),
    load: Object.freeze(parseLoadConfig(read)),
    tls: Object.freeze(parseTlsConfig(read)),
  };
  // An SLO with no ceiling given: auto is the ceiling's default (N from the engine's capacity).
  if (config.ttftSloMs !== undefined && config.engineRequestLimit === undefined && !read.raw('engineRequestLimit')) {
    Object.assign(config, { engineRequestLimit: AUTO_FALLBACK_LIMIT, engineRequestLimitAuto: true });
  }
  const bounds = pushbackBoundsProblem(config);
  if (bounds) {
    const sources = (['retryPushbackMinMs', 'retryPushbackMaxMs'] as const).flatMap((key) => read.raw(key)?.source ?? []);
    read.report(sources.join(' and '), `: ${bounds}`);
  }
  read.check('ERR_SIDECAR_CONFIG');
  return Object.freeze(config);
}

/** A positive integer, or `auto` (any case): AUTO_FALLBACK_LIMIT until the engine tells its capacity. */
function parseEngineRequestLimit(read: Reader): Pick<SidecarConfig, 'engineRequestLimit' | 'engineRequestLimitAuto'> {
  const found = read.raw('engineRequestLimit');
  const text = found?.value.trim() ?? '';
  if (text.toLowerCase() === 'auto') return { engineRequestLimit: AUTO_FALLBACK_LIMIT, engineRequestLimitAuto: true };
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  const valid = Number.isSafeInteger(value) && value >= LIVE_SETTINGS.engineRequestLimit.min;
  if (found && !valid) read.report(found.source, `must be a positive integer or auto, got "${found.value}"`);
  return { engineRequestLimit: valid ? value : undefined, engineRequestLimitAuto: false };
}

/** Printable ASCII without spaces (it travels in an HTTP header), long enough not to be guessed; the value is never quoted. */
function parseAdminToken(read: Reader): string | undefined {
  const found = read.raw('adminToken');
  if (!found) return undefined;
  const token = found.value.trim();
  if (!/^[\x21-\x7e]+$/u.test(token)) {
    read.report(found.source, 'must be printable ASCII without spaces (the value is not shown)');
    return undefined;
  }
  if (token.length < MIN_ADMIN_TOKEN_LENGTH) {
    read.report(found.source, `must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters, got ${token.length} (the value is not shown); e.g. openssl rand -hex 32`);
    return undefined;
  }
  return token;
}

type Reader = OptionReader<typeof SIDECAR_OPTIONS>;

function parseConnectionConfig(read: Reader): ConnectionConfig {
  return {
    maxConcurrentStreams: read.integer('maxConcurrentStreams', 1, MAX_MAX_CONCURRENT_STREAMS),
    idleTimeoutMs: read.integer('idleTimeoutMs', 0, MAX_TIMER_MS),
    handshakeTimeoutMs: read.integer('handshakeTimeoutMs', MIN_HANDSHAKE_TIMEOUT_MS, MAX_TIMER_MS),
    upstreamConnections: read.integer('upstreamConnections', 1, MAX_UPSTREAM_CONNECTIONS),
    upstreamPingIntervalMs: read.integer('upstreamPingIntervalMs', 10, 3_600_000),
    upstreamPingTimeoutMs: read.integer('upstreamPingTimeoutMs', 10, 3_600_000),
    upstreamKeepaliveIntervalMs: read.integer('upstreamKeepaliveIntervalMs', 10, MAX_TIMER_MS),
    upstreamKeepaliveWithoutCalls: read.boolean('upstreamKeepaliveWithoutCalls'),
  };
}

function parseLoadConfig(read: Reader): LoadConfig {
  const config: LoadConfig = {
    engineMetricsUrl: read.url('engineMetricsUrl', ['http:', 'https:']),
    engineMetricsFormat: read.choice('engineMetricsFormat', ENGINE_METRICS_FORMATS),
    engineLoadSource: parseEngineLoadSource(read),
    scrapeIntervalMs: read.integer('scrapeIntervalMs', 10, 600_000),
    generateWire: read.choice('generateWire', GENERATE_WIRES),
    trackOutputBlocks: read.boolean('trackOutputBlocks'),
    kvTotalBlocks: read.integer('kvTotalBlocks', CAPACITY_BOUNDS.kvTotalBlocks.min, CAPACITY_BOUNDS.kvTotalBlocks.max),
    kvBlockSize: read.integer('kvBlockSize', CAPACITY_BOUNDS.kvBlockSize.min, CAPACITY_BOUNDS.kvBlockSize.max),
    maxNumBatchedTokens: read.integer('maxNumBatchedTokens', CAPACITY_BOUNDS.maxNumBatchedTokens.min, CAPACITY_BOUNDS.maxNumBatchedTokens.max),
    dataParallelSize: read.integer('dataParallelSize', CAPACITY_BOUNDS.dataParallelSize.min, CAPACITY_BOUNDS.dataParallelSize.max),
    setByOperator: { kvBlockSize: read.raw('kvBlockSize') !== undefined, dataParallelSize: read.raw('dataParallelSize') !== undefined },
    servedModelName: parseServedModelName(read),
    natsServers: parseNatsServers(read),
    natsSecurity: parseNatsSecurity(read, read.raw('natsUrl') !== undefined),
    namespace: read.string('namespace'),
    component: read.string('component'),
    endpoint: read.string('endpoint'),
    eventFormat: read.choice('eventFormat', EVENT_FORMATS),
    loadHeartbeatMs: read.integer('loadHeartbeatMs', 10, 3_600_000),
    natsLivenessTimeoutMs: read.integer('natsLivenessTimeoutMs', 50, 3_600_000),
    workerId: read.integer('workerId', 0, Number.MAX_SAFE_INTEGER),
  };
  if (config.engineLoadSource === 'getloads' && ENGINE_PATHS[config.generateWire].loads === undefined) {
    read.report(
      read.raw('engineLoadSource')!.source,
      `: getloads needs a load RPC, and ${config.generateWire} (${read.names('generateWire')}) has none; use scrape or traffic`,
    );
  }
  return config;
}

function parseTlsConfig(read: Reader): SidecarTlsConfig {
  const ingress = readServerTls(read, { cert: 'tlsCert', key: 'tlsKey', clientCa: 'tlsClientCa' });
  const system = readServerTls(read, { cert: 'systemTlsCert', key: 'systemTlsKey' });
  const upstream = readClientTls(read, {
    enabled: 'upstreamTls',
    ca: 'upstreamCa',
    cert: 'upstreamCert',
    key: 'upstreamKey',
    serverName: 'upstreamServerName',
  });
  if (upstream && read.raw('upstream') === undefined)
    read.report(read.raw('upstreamTls')!.source, `needs ${read.names('upstream')} (the demo's embedded engine speaks h2c)`);
  return { ingress, system, upstream, reloadIntervalMs: read.integer('tlsReloadIntervalMs', 0, 3_600_000) };
}

/**
 * scrape needs a metrics URL (the demo's embedded engine has one); a metrics URL with a source
 * that does not scrape would be silently unused, so both are refused.
 */
function parseEngineLoadSource(read: Reader): EngineLoadSource {
  const source = read.choice('engineLoadSource', ENGINE_LOAD_SOURCES);
  const url = read.raw('engineMetricsUrl');
  const upstream = read.raw('upstream');
  if (source === 'scrape' && url === undefined && upstream !== undefined) {
    read.report(read.raw('engineLoadSource')!.source, `: scrape needs the engine's metrics URL (${read.names('engineMetricsUrl')})`);
  }
  if ((source === 'getloads' || source === 'traffic') && url !== undefined) {
    read.report(url.source, `is set but ${read.raw('engineLoadSource')!.source} is "${source}", which does not scrape; remove one`);
  }
  return source;
}

/** HOST:PORT that a frontend can dial: a wildcard host (0.0.0.0, ::) is refused; port 0 means the bound port. */
function parseAdvertiseAddress(read: Reader): HostPort | undefined {
  const key: SidecarOptionKey = 'advertiseAddress';
  const address = read.hostPort(key, true);
  if (address !== undefined && isUnspecifiedHost(address.host)) {
    read.report(read.raw(key)!.source, `: host must be an address frontends can dial, not the wildcard "${address.host}"`);
    return undefined;
  }
  return address;
}

/** Any non-empty name without control characters (it goes into JSON events and protobuf strings). */
function parseServedModelName(read: Reader): string | undefined {
  const key: SidecarOptionKey = 'servedModelName';
  const name = read.string(key);
  if (name !== undefined && /[\u0000-\u001f\u007f]/u.test(name)) {
    read.report(read.raw(key)!.source, `must not contain control characters, got ${JSON.stringify(name)}`);
    return undefined;
  }
  return name;
}
