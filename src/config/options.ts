/**
 * The sidecar's options, in one table: flag, environment twin, default and help text. The CLI
 * builds its commander options from this table and `parseSidecarConfig` validates the same
 * keys, so a flag cannot exist without its env twin or its help line.
 */
export interface OptionSpec {
  /** Commander flag, e.g. `--engine-request-limit <n>`. Absent for env-only knobs. */
  readonly flag?: string;
  /** Environment twin; the flag wins when both are set. */
  readonly env: string;
  readonly help: string;
  /** Default shown in --help; the typed default lives in the parser. */
  readonly defaultText?: string;
}

export const SIDECAR_OPTIONS = {
  listen: { flag: '--listen <host:port>', env: 'DYN_SIDECAR_LISTEN', defaultText: '0.0.0.0:50050', help: 'gRPC ingress address (h2c); port 0 picks a free port' },
  upstream: {
    flag: '--upstream <host:port>',
    env: 'DYN_SIDECAR_UPSTREAM',
    help: 'the inference engine (h2c gRPC). When neither flag nor env is given, an embedded simulated vLLM engine is started (demo mode)',
  },
  systemPort: { flag: '--system-port <port>', env: 'DYN_SYSTEM_PORT', defaultText: '9090', help: 'HTTP port for /metrics /health /live /ready /load; 0 picks a free port' },
  systemHost: { flag: '--system-host <host>', env: 'DYN_SYSTEM_HOST', defaultText: '0.0.0.0', help: 'HTTP host for the system port' },
  engineRequestLimit: {
    flag: '--engine-request-limit <n>',
    env: 'DYN_ENGINE_REQUEST_LIMIT',
    help: 'max calls inside the engine at once (positive integer); unset = admission off, nothing is queued or rejected',
  },
  requestQueueLimit: {
    env: 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT',
    defaultText: '16',
    help: 'overflow queue size Q (integer >= 2), only used with an engine request limit; hard cap is limit + Q',
  },
  retryPushbackMs: {
    flag: '--retry-pushback-ms <ms>',
    env: 'DYN_SIDECAR_RETRY_PUSHBACK_MS',
    defaultText: '250',
    help: 'grpc-retry-pushback-ms hint sent with RESOURCE_EXHAUSTED rejections',
  },
  drainGraceMs: {
    flag: '--drain-grace-ms <ms>',
    env: 'DYN_SIDECAR_DRAIN_GRACE_MS',
    defaultText: '30000',
    help: 'on SIGTERM, how long calls already admitted may run before the sidecar exits',
  },
  logLevel: { flag: '--log-level <level>', env: 'DYN_LOG_LEVEL', defaultText: 'info', help: 'debug | info | warn | error (JSON lines on stderr)' },
} as const satisfies Record<string, OptionSpec>;

export type SidecarOptionKey = keyof typeof SIDECAR_OPTIONS;

/** Commander stores `--engine-request-limit` as `engineRequestLimit`; the table keys are those names. */
export type RawFlags = Partial<Record<SidecarOptionKey, string | undefined>>;
