/**
 * Parses flags and environment into one typed, frozen SidecarConfig, collecting every problem
 * before failing (ConfigError). Sources are injected so tests need no real environment.
 * An empty environment variable counts as unset, as compose files use `VAR=` to clear one.
 */
import { ENGINE_METRICS_FORMATS, type EngineMetricsFormatOption } from '../load/engine-metrics-reader.js';
import type { LogLevel } from '../../platform/log.js';
import { MAX_TIMER_MS } from '../../protocol/grpc/deadline.js';
import { isUnspecifiedHost } from './advertise-address.js';
import { type HostPort } from '../../platform/config/host-port.js';
import { SIDECAR_OPTIONS, type RawFlags, type SidecarOptionKey } from './options.js';
import type { Env } from '../../platform/config/option-reader.js';
import { OptionReader } from '../../platform/config/option-reader.js';
import { parseNatsServers } from '../../platform/config/option-reader.js';

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
  /** `undefined`: admission off. */
  readonly engineRequestLimit: number | undefined;
  readonly requestQueueLimit: number;
  readonly retryPushbackMs: number;
  readonly drainGraceMs: number;
  /** `undefined`: the mode's default (on in demo mode, off in front of a real engine). */
  readonly statusIntervalMs: number | undefined;
  readonly logLevel: LogLevel;
  readonly connections: ConnectionConfig;
  /** Minimum time between two /metrics renders; 0: render on every scrape. */
  readonly metricsCacheMs: number;
  readonly load: LoadConfig;
}

/** Limits and timeouts for client connections and the engine connection. */
export interface ConnectionConfig {
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised to ingress clients. */
  readonly maxConcurrentStreams: number;
  /** Close a client connection (ingress or system port) idle this long; 0: never. */
  readonly idleTimeoutMs: number;
  /** Ingress: preface + SETTINGS within this; system port: request headers within this. */
  readonly handshakeTimeoutMs: number;
  readonly upstreamPingIntervalMs: number;
  readonly upstreamPingTimeoutMs: number;
}

/** Load tracking and load events (docs/architecture.md, "Load events"). */
export interface LoadConfig {
  readonly engineMetricsUrl: string | undefined;
  readonly engineMetricsFormat: EngineMetricsFormatOption;
  readonly scrapeIntervalMs: number;
  readonly trackOutputBlocks: boolean;
  readonly kvTotalBlocks: number | undefined;
  readonly kvBlockSize: number;
  readonly maxNumBatchedTokens: number | undefined;
  readonly dataParallelSize: number;
  /** The model in load events; `undefined`: asked from the engine (GetModelInfo). */
  readonly servedModelName: string | undefined;
  /** Comma-separated NATS servers; `undefined`: no publishing. */
  readonly natsServers: readonly string[] | undefined;
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
  readonly loadHeartbeatMs: number;
  /** Unconfirmed publishes or unanswered PINGs for this long mean disconnected. */
  readonly natsLivenessTimeoutMs: number;
  /** `undefined`: derived from host name and listen port. */
  readonly workerId: number | undefined;
}

export const DEFAULT_LISTEN: HostPort = { host: '0.0.0.0', port: 50050 };
export const DEFAULT_SYSTEM_PORT = 9090;
export const DEFAULT_REQUEST_QUEUE_LIMIT = 16;
export const MIN_REQUEST_QUEUE_LIMIT = 2;
export const DEFAULT_RETRY_PUSHBACK_MS = 250;
export const DEFAULT_DRAIN_GRACE_MS = 30_000;
export const DEFAULT_SCRAPE_INTERVAL_MS = 250;
export const DEFAULT_LOAD_HEARTBEAT_MS = 1000;
/** A burst of load changes within this becomes one NATS publish or one WorkerLoad update. */
export const LOAD_DEBOUNCE_MS = 5;
/** GetModelInfo, asked until the engine answers: one attempt at a time, this long at most, this far apart. */
export const MODEL_INFO_TIMEOUT_MS = 5000;
export const MODEL_INFO_RETRY_MS = 2000;
export const DEFAULT_KV_BLOCK_SIZE = 16;
export const DEFAULT_MAX_CONCURRENT_STREAMS = 1000;
/** HTTP/2 stream counts are 31-bit (RFC 9113 section 6.5.2). */
export const MAX_MAX_CONCURRENT_STREAMS = 2 ** 31 - 1;
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
export const MIN_HANDSHAKE_TIMEOUT_MS = 100;
export const DEFAULT_UPSTREAM_PING_INTERVAL_MS = 1000;
export const DEFAULT_UPSTREAM_PING_TIMEOUT_MS = 3000;
/**
 * One render of the full registry costs about 0.9-2.3 ms of event-loop CPU (measured; most of it
 * prom-client's default process collectors). Once a second bounds a scrape flood to that per
 * second, and a Prometheus scraping every 15 s never sees a value older than 1 s.
 */
export const DEFAULT_METRICS_CACHE_MS = 1000;
export const DEFAULT_NATS_LIVENESS_TIMEOUT_MS = 2000;
const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export function parseSidecarConfig(flags: RawFlags, env: Env): SidecarConfig {
  const read = new OptionReader(flags, env, SIDECAR_OPTIONS);
  const key = (k: SidecarOptionKey): string => k;
  const engineRequestLimit = read.integer(key('engineRequestLimit'), 1, Number.MAX_SAFE_INTEGER, undefined);
  const config: SidecarConfig = {
    listen: read.hostPort(key('listen'), true, DEFAULT_LISTEN),
    advertiseAddress: parseAdvertiseAddress(read),
    upstream: read.hostPort(key('upstream'), false, undefined),
    systemHost: read.string(key('systemHost'), '0.0.0.0'),
    systemPort: read.integer(key('systemPort'), 0, 65535, DEFAULT_SYSTEM_PORT),
    engineRequestLimit,
    // Validated even when no limit is set: a typo should not wait for the day the limit is turned on.
    requestQueueLimit: read.integer(key('requestQueueLimit'), MIN_REQUEST_QUEUE_LIMIT, Number.MAX_SAFE_INTEGER, DEFAULT_REQUEST_QUEUE_LIMIT),
    retryPushbackMs: read.integer(key('retryPushbackMs'), 0, 3_600_000, DEFAULT_RETRY_PUSHBACK_MS),
    drainGraceMs: read.integer(key('drainGraceMs'), 0, 3_600_000, DEFAULT_DRAIN_GRACE_MS),
    statusIntervalMs: read.integer(key('statusIntervalMs'), 0, 3_600_000, undefined),
    logLevel: read.choice(key('logLevel'), LOG_LEVELS, 'info'),
    connections: Object.freeze(parseConnectionConfig(read)),
    metricsCacheMs: read.integer(key('metricsCacheMs'), 0, 600_000, DEFAULT_METRICS_CACHE_MS),
    load: Object.freeze(parseLoadConfig(read)),
  };
  read.check();
  return Object.freeze(config);
}

function parseConnectionConfig(read: OptionReader): ConnectionConfig {
  const key = (k: SidecarOptionKey): string => k;
  return {
    maxConcurrentStreams: read.integer(key('maxConcurrentStreams'), 1, MAX_MAX_CONCURRENT_STREAMS, DEFAULT_MAX_CONCURRENT_STREAMS),
    idleTimeoutMs: read.integer(key('idleTimeoutMs'), 0, MAX_TIMER_MS, DEFAULT_IDLE_TIMEOUT_MS),
    handshakeTimeoutMs: read.integer(key('handshakeTimeoutMs'), MIN_HANDSHAKE_TIMEOUT_MS, MAX_TIMER_MS, DEFAULT_HANDSHAKE_TIMEOUT_MS),
    upstreamPingIntervalMs: read.integer(key('upstreamPingIntervalMs'), 10, 3_600_000, DEFAULT_UPSTREAM_PING_INTERVAL_MS),
    upstreamPingTimeoutMs: read.integer(key('upstreamPingTimeoutMs'), 10, 3_600_000, DEFAULT_UPSTREAM_PING_TIMEOUT_MS),
  };
}

function parseLoadConfig(read: OptionReader): LoadConfig {
  const key = (k: SidecarOptionKey): string => k;
  return {
    engineMetricsUrl: read.url(key('engineMetricsUrl'), ['http:', 'https:']),
    engineMetricsFormat: read.choice(key('engineMetricsFormat'), ENGINE_METRICS_FORMATS, 'auto'),
    scrapeIntervalMs: read.integer(key('scrapeIntervalMs'), 10, 600_000, DEFAULT_SCRAPE_INTERVAL_MS),
    trackOutputBlocks: read.boolean(key('trackOutputBlocks')),
    kvTotalBlocks: read.integer(key('kvTotalBlocks'), 1, Number.MAX_SAFE_INTEGER, undefined),
    kvBlockSize: read.integer(key('kvBlockSize'), 1, 1 << 20, DEFAULT_KV_BLOCK_SIZE),
    maxNumBatchedTokens: read.integer(key('maxNumBatchedTokens'), 1, Number.MAX_SAFE_INTEGER, undefined),
    dataParallelSize: read.integer(key('dataParallelSize'), 1, 1024, 1),
    servedModelName: parseServedModelName(read),
    natsServers: parseNatsServers(read),
    namespace: read.string(key('namespace'), 'dynamo'),
    component: read.string(key('component'), 'backend'),
    endpoint: read.string(key('endpoint'), 'generate'),
    loadHeartbeatMs: read.integer(key('loadHeartbeatMs'), 10, 3_600_000, DEFAULT_LOAD_HEARTBEAT_MS),
    natsLivenessTimeoutMs: read.integer(key('natsLivenessTimeoutMs'), 50, 3_600_000, DEFAULT_NATS_LIVENESS_TIMEOUT_MS),
    workerId: read.integer(key('workerId'), 0, Number.MAX_SAFE_INTEGER, undefined),
  };
}

/** HOST:PORT that a frontend can dial: a wildcard host (0.0.0.0, ::) is refused; port 0 means the bound port. */
function parseAdvertiseAddress(read: OptionReader): HostPort | undefined {
  const key: SidecarOptionKey = 'advertiseAddress';
  const address = read.hostPort(key, true, undefined);
  if (address !== undefined && isUnspecifiedHost(address.host)) {
    read.problems.push(`${read.raw(key)!.source}: host must be an address frontends can dial, not the wildcard "${address.host}"`);
    return undefined;
  }
  return address;
}

/** Any non-empty name without control characters (it goes into JSON events and protobuf strings). */
function parseServedModelName(read: OptionReader): string | undefined {
  const key: SidecarOptionKey = 'servedModelName';
  const name = read.string(key, undefined);
  if (name !== undefined && /[\u0000-\u001f\u007f]/u.test(name)) {
    read.problems.push(`${read.raw(key)!.source} must not contain control characters, got ${JSON.stringify(name)}`);
    return undefined;
  }
  return name;
}

