/**
 * The sidecar's options, in one table: flag, environment twin, default and help text. The CLI
 * builds its commander options from this table and `parseSidecarConfig` validates the same
 * keys, so a flag cannot exist without its env twin or its help line. Each typed `default` is
 * the one the parser gives, the one --help shows, and (as the DEFAULT_* constants of
 * sidecar-config.ts) the one the classes fall back to when built without a config.
 */
import type { OptionSpec } from '../../platform/config/option-spec.js';
import { LOAD_SUBJECT_OPTIONS, MAX_DP_RANKS } from '../../protocol/load-event.js';
import { NATS_SECURITY_OPTIONS } from '../../platform/nats-security.js';

/** Demo mode (no upstream): the status line is on, this often, unless set otherwise. */
export const DEMO_STATUS_INTERVAL_MS = 5000;

export const SIDECAR_OPTIONS = {
  listen: {
    flag: '--listen <host:port>',
    env: 'DYN_SIDECAR_LISTEN',
    default: Object.freeze({ host: '0.0.0.0', port: 50050 }),
    help: 'gRPC ingress address (h2c); port 0 picks a free port',
  },
  advertiseAddress: {
    flag: '--advertise-address <host:port>',
    env: 'DYN_SIDECAR_ADVERTISE_ADDRESS',
    defaultText:
      'the --listen host when it is a specific address (not 0.0.0.0, :: or empty), else the first non-internal IPv4 address of this machine, else 127.0.0.1; with the port actually bound',
    help: 'where frontends reach this gRPC ingress, sent as grpc_address in load events; port 0 = the port actually bound',
  },
  upstream: {
    flag: '--upstream <host:port>',
    env: 'DYN_SIDECAR_UPSTREAM',
    help: 'the inference engine (h2c gRPC). When neither flag nor env is given, an embedded simulated vLLM engine is started (demo mode)',
  },
  systemPort: {
    flag: '--system-port <port>',
    env: 'DYN_SYSTEM_PORT',
    default: 9090,
    help: 'HTTP port for /metrics /health /live /ready /load; 0 picks a free port',
  },
  systemHost: { flag: '--system-host <host>', env: 'DYN_SYSTEM_HOST', default: '0.0.0.0', help: 'HTTP host for the system port' },
  engineRequestLimit: {
    flag: '--engine-request-limit <n>',
    env: 'DYN_ENGINE_REQUEST_LIMIT',
    help: "max calls inside the engine at once: a positive integer, or auto = ceil(1.5 x the engine's max_num_seqs x dp ranks) from its GetLoads (max_running_requests per rank), Dynamo's coming default, 10000 until the engine answers or if it cannot; unset = admission off, nothing is queued or rejected. Live: the admin API and SIGHUP change it without a restart (a number set so replaces auto)",
  },
  requestQueueLimit: {
    env: 'DYN_DYNAMO_REQUEST_QUEUE_LIMIT',
    default: 16,
    help: 'overflow queue size Q (integer >= 2), only used with an engine request limit; hard cap is limit + Q',
  },
  retryPushbackMs: {
    flag: '--retry-pushback-ms <ms>',
    env: 'DYN_SIDECAR_RETRY_PUSHBACK_MS',
    default: 250,
    help: 'grpc-retry-pushback-ms hint sent with RESOURCE_EXHAUSTED rejections',
  },
  // Live settings (docs/operations/admission.md): the admin API and SIGHUP change these without a restart.
  retryPushbackMode: {
    flag: '--retry-pushback-mode <mode>',
    env: 'DYN_SIDECAR_RETRY_PUSHBACK_MODE',
    default: 'fixed',
    help: 'fixed: every rejection carries --retry-pushback-ms; adaptive: the expected wait for a slot, (queued + 1) / N x the recent mean time calls hold a slot, with +-25% jitter so retries spread, within --retry-pushback-min-ms..--retry-pushback-max-ms (--retry-pushback-ms until a call has ended)',
  },
  retryPushbackMinMs: {
    flag: '--retry-pushback-min-ms <ms>',
    env: 'DYN_SIDECAR_RETRY_PUSHBACK_MIN_MS',
    default: 100,
    help: 'adaptive pushback: the least sent',
  },
  retryPushbackMaxMs: {
    flag: '--retry-pushback-max-ms <ms>',
    env: 'DYN_SIDECAR_RETRY_PUSHBACK_MAX_MS',
    default: 10_000,
    help: 'adaptive pushback: the most sent (>= --retry-pushback-min-ms)',
  },
  queueTimeoutMs: {
    flag: '--queue-timeout-ms <ms>',
    env: 'DYN_DYNAMO_REQUEST_QUEUE_TIMEOUT_MS',
    default: 0,
    help: "a call queued longer than this gets RESOURCE_EXHAUSTED (Server overloaded: worker at capacity, with the retry pushback), like HAProxy's timeout queue, so a call without a deadline cannot wait for ever; a shorter deadline of the call still wins (DEADLINE_EXCEEDED); 0 = off. A change applies to calls queued after it",
  },
  admissionMode: {
    flag: '--admission-mode <mode>',
    env: 'DYN_SIDECAR_ADMISSION_MODE',
    default: 'static',
    help: "static: the engine request limit is --engine-request-limit; adaptive: it moves between --adaptive-min-limit and --engine-request-limit, by Netflix's gradient2 on the time from a call's slot to its first token (it shrinks while first tokens come more than 1.5x later than usual), shown in dynamo_sidecar_engine_request_limit and the load events. Only used with an engine request limit",
  },
  adaptiveMinLimit: {
    flag: '--adaptive-min-limit <n>',
    env: 'DYN_SIDECAR_ADAPTIVE_MIN_LIMIT',
    default: 1,
    help: 'adaptive admission: the least the engine request limit goes down to (at most --engine-request-limit)',
  },
  firstTokenLimit: {
    flag: '--first-token-limit <n>',
    env: 'DYN_SIDECAR_FIRST_TOKEN_LIMIT',
    defaultText: 'none',
    help: 'of the calls in the engine, at most this many may still be waiting for their first response message (the first token of a Generate); more wait in the queue although slots are free, so that prefills do not crowd each other and every admitted call keeps its TTFT. Only used with an engine request limit; unset = no such limit',
  },
  maxQueueWaitMs: {
    flag: '--max-queue-wait-ms <ms>',
    env: 'DYN_SIDECAR_MAX_QUEUE_WAIT_MS',
    default: 0,
    help: 'a call joins the queue only if its expected wait (from how fast slots and first tokens have come free lately) fits within this and within its own deadline; otherwise it gets RESOURCE_EXHAUSTED at once with that expected wait as its pushback, so the frontend can go elsewhere now instead of after the wait. Until a call has ended there is no estimate, and a call that finds no room is refused at once with --retry-pushback-ms; 0 = off (the queue timeout still applies)',
  },
  ttftSloMs: {
    flag: '--ttft-slo-ms <ms>',
    env: 'DYN_SIDECAR_TTFT_SLO_MS',
    help: "the time-to-first-token SLO, the one number admission needs: set, each Generate call is admitted by its own work, not by a count. The sidecar reads the call's prompt and max_tokens, reserves its KV blocks (prompt + a learned 90th percentile of outputs) against the engine's cache, learns the engine's prefill rate from first tokens, and refuses at once (RESOURCE_EXHAUSTED, pushback = the predicted wait) a call whose predicted TTFT (prefill ahead + its own + its wait for KV room) exceeds the SLO or its deadline; a call that must wait queues only while it can still make the SLO. N and Q stay hard ceilings (--engine-request-limit auto gives N). Integer ms 1..86400000; unset = off (admission by counts alone)",
  },
  priorityStarvationLimit: {
    flag: '--priority-starvation-limit <n>',
    env: 'DYN_SIDECAR_PRIORITY_STARVATION_LIMIT',
    default: 16,
    help: 'queued calls reach the engine by priority (x-request-priority, lower first), round-robin across tenants (x-tenant-id) within a priority; at least one admission from the queue in every n + 1 goes to the call that has waited longest, whatever its priority, so no call waits for ever behind more urgent ones. Integer >= 1',
  },
  defaultPriority: {
    flag: '--default-priority <p>',
    env: 'DYN_SIDECAR_DEFAULT_PRIORITY',
    default: 0,
    help: 'the priority of a call that sends no x-request-priority metadata (an int32; lower runs sooner, as in vLLM)',
  },
  metricsMaxTenants: {
    flag: '--metrics-max-tenants <k>',
    env: 'DYN_SIDECAR_METRICS_MAX_TENANTS',
    default: 20,
    help: 'per-tenant metric series: the first k tenants seen get their own tenant label, every later one is counted as tenant="other" (the same bound applies to priority values); 0 counts every tenant as other',
  },
  drainGraceMs: {
    flag: '--drain-grace-ms <ms>',
    env: 'DYN_SIDECAR_DRAIN_GRACE_MS',
    default: 30_000,
    help: 'on SIGTERM, how long calls already admitted may take to deliver their whole answer before the sidecar exits',
  },
  drainDelayMs: {
    flag: '--drain-delay-ms <ms>',
    env: 'DYN_SIDECAR_DRAIN_DELAY_MS',
    default: 0,
    help: 'on SIGTERM, first report draining (/ready 503, draining load events) and keep serving new calls this long, while load balancers and Kubernetes take the endpoint out; then refuse new calls and give admitted ones --drain-grace-ms',
  },
  adminToken: {
    flag: '--admin-token <token>',
    env: 'DYN_SIDECAR_ADMIN_TOKEN',
    defaultText: 'none: the admin API is off (404)',
    help: 'turns on the admin API on the system port (GET and PUT /admission: live engine request limit, queue and pushback), which then requires Authorization: Bearer <token>; at least 16 printable characters, never logged. Prefer the variable or the config file: a flag shows in ps',
  },
  configFile: {
    flag: '--config-file <path>',
    env: 'DYN_SIDECAR_CONFIG_FILE',
    defaultText: 'none',
    help: "NAME=VALUE lines with these settings' environment names (# comment lines); a flag or variable wins over the file. SIGHUP re-reads it and applies its live settings (engine request limit, queue limit and timeout, retry pushback); another changed setting is logged as needing a restart",
  },
  statusIntervalMs: {
    flag: '--status-interval-ms <ms>',
    env: 'DYN_SIDECAR_STATUS_INTERVAL_MS',
    defaultText: `${DEMO_STATUS_INTERVAL_MS} in demo mode, else 0 (off)`,
    help: 'print a one-line status (in engine, queued, rejected, tokens/s) on stdout this often',
  },
  // Connection limits and timeouts (issue 8): hostile or dead peers must not hold resources forever.
  maxConcurrentStreams: {
    flag: '--max-concurrent-streams <n>',
    env: 'DYN_SIDECAR_MAX_CONCURRENT_STREAMS',
    default: 1000,
    help: 'max concurrent streams per client connection on the gRPC ingress, advertised in SETTINGS (1..2^31-1)',
  },
  idleTimeoutMs: {
    flag: '--idle-timeout-ms <ms>',
    env: 'DYN_SIDECAR_IDLE_TIMEOUT_MS',
    default: 300_000,
    help: 'close a client connection (ingress or system port) with no open call or request for this long; 0 = never',
  },
  handshakeTimeoutMs: {
    flag: '--handshake-timeout-ms <ms>',
    env: 'DYN_SIDECAR_HANDSHAKE_TIMEOUT_MS',
    default: 10_000,
    help: "ingress: the client's HTTP/2 preface and SETTINGS must arrive within it, and a connection with open calls must answer a PING within it; system port: a request must start and its headers complete within it (>= 100)",
  },
  upstreamConnections: {
    flag: '--upstream-connections <k>',
    env: 'DYN_SIDECAR_UPSTREAM_CONNECTIONS',
    // Measured against 4 and 8 (docs/data-plane.md): no token latency gain the benchmark could
    // resolve, and 15-31% more CPU per unary call. More connections limit what one broken
    // connection costs, for engines behind something that cuts connections.
    default: 1,
    help: 'HTTP/2 connections to the engine (1..64); each new call goes to the one with the fewest open calls among those answering checks, so one broken connection does not fail calls another can carry. Admission is unchanged: it counts calls, not connections',
  },
  upstreamPingIntervalMs: {
    flag: '--upstream-ping-interval-ms <ms>',
    env: 'DYN_SIDECAR_UPSTREAM_PING_INTERVAL_MS',
    default: 1000,
    help: 'how often each engine connection is checked to still answer: a PING when keepalive allows one, else a grpc.health.v1.Health/Check call (any answer, even UNIMPLEMENTED, counts)',
  },
  upstreamPingTimeoutMs: {
    flag: '--upstream-ping-timeout-ms <ms>',
    env: 'DYN_SIDECAR_UPSTREAM_PING_TIMEOUT_MS',
    default: 3000,
    help: 'the engine is unreachable (not ready) when its SETTINGS or the answer to a check take longer than this',
  },
  upstreamKeepaliveIntervalMs: {
    flag: '--upstream-keepalive-interval-ms <ms>',
    env: 'DYN_SIDECAR_UPSTREAM_KEEPALIVE_INTERVAL_MS',
    // gRPC servers on grpc-core (grpcio) refuse PINGs more frequent than this by default
    // (grpc.http2.min_ping_interval_without_data_ms) and close the connection, failing its calls.
    default: 300_000,
    help: "the least time between two HTTP/2 PINGs on an engine connection (gRPC keepalive); no shorter than the engine's minimum (grpc-core servers: 5 minutes by default). Doubled each time the engine answers GOAWAY too_many_pings",
  },
  upstreamKeepaliveWithoutCalls: {
    flag: '--upstream-keepalive-without-calls',
    env: 'DYN_SIDECAR_UPSTREAM_KEEPALIVE_WITHOUT_CALLS',
    default: false,
    help: 'PING engine connections that carry no call too; only for an engine that permits it (grpc-core: grpc.keepalive_permit_without_calls)',
  },
  // TLS (docs/operations/tls.md): every listener and client is plaintext unless given its files.
  tlsCert: {
    flag: '--tls-cert <file>',
    env: 'DYN_SIDECAR_TLS_CERT',
    defaultText: 'none: h2c',
    help: 'certificate chain (PEM) of the gRPC ingress: HTTP/2 over TLS (ALPN h2) instead of h2c; needs --tls-key',
  },
  tlsKey: { flag: '--tls-key <file>', env: 'DYN_SIDECAR_TLS_KEY', defaultText: 'none', help: 'unencrypted PEM private key of --tls-cert' },
  tlsClientCa: {
    flag: '--tls-client-ca <file>',
    env: 'DYN_SIDECAR_TLS_CLIENT_CA',
    defaultText: 'none: client certificates not asked',
    help: 'CA bundle (PEM): every ingress client must present a certificate signed by it (mTLS), else its handshake fails; needs --tls-cert',
  },
  systemTlsCert: {
    flag: '--system-tls-cert <file>',
    env: 'DYN_SYSTEM_TLS_CERT',
    defaultText: 'none: HTTP',
    help: 'certificate chain (PEM) of the system port: HTTPS for /metrics /health /live /ready /load and the admin API; needs --system-tls-key',
  },
  systemTlsKey: { flag: '--system-tls-key <file>', env: 'DYN_SYSTEM_TLS_KEY', defaultText: 'none', help: 'unencrypted PEM private key of --system-tls-cert' },
  upstreamTls: {
    flag: '--upstream-tls',
    env: 'DYN_SIDECAR_UPSTREAM_TLS',
    default: false,
    help: 'HTTP/2 over TLS (ALPN h2) to the engine, verifying its certificate; a failed handshake makes the engine unreachable, with the reason in the log and /ready',
  },
  upstreamCa: {
    flag: '--upstream-ca <file>',
    env: 'DYN_SIDECAR_UPSTREAM_CA',
    defaultText: 'the system CAs',
    help: "CA bundle (PEM) the engine's certificate must chain to; needs --upstream-tls",
  },
  upstreamCert: {
    flag: '--upstream-cert <file>',
    env: 'DYN_SIDECAR_UPSTREAM_CERT',
    defaultText: 'none',
    help: 'client certificate chain (PEM) presented to an engine that verifies clients (mTLS); needs --upstream-key and --upstream-tls',
  },
  upstreamKey: { flag: '--upstream-key <file>', env: 'DYN_SIDECAR_UPSTREAM_KEY', defaultText: 'none', help: 'unencrypted PEM private key of --upstream-cert' },
  upstreamServerName: {
    flag: '--upstream-server-name <name>',
    env: 'DYN_SIDECAR_UPSTREAM_SERVER_NAME',
    defaultText: 'the --upstream host',
    help: "name sent as SNI and required in the engine's certificate; needs --upstream-tls",
  },
  tlsReloadIntervalMs: {
    flag: '--tls-reload-interval-ms <ms>',
    env: 'DYN_TLS_RELOAD_INTERVAL_MS',
    default: 5000,
    help: 'how often certificate files are read for changes (Kubernetes secret rotation); changed files are checked and used for new connections, existing ones keep theirs; 0 = never',
  },
  metricsCacheMs: {
    flag: '--metrics-cache-ms <ms>',
    env: 'DYN_SIDECAR_METRICS_CACHE_MS',
    // One render of the full registry costs about 0.9-2.3 ms of event-loop CPU (measured; most
    // of it prom-client's default process collectors). Once a second bounds a scrape flood to
    // that per second, and a Prometheus scraping every 15 s never sees a value older than 1 s.
    default: 1000,
    help: 'render /metrics at most once per this many ms and serve that text to every scrape in between; 0 = render on every scrape',
  },
  logLevel: { flag: '--log-level <level>', env: 'DYN_LOG_LEVEL', default: 'info', help: 'debug | info | warn | error (JSON lines on stderr)' },
  // Load tracking and events (docs/architecture.md, "Load events").
  engineMetricsUrl: {
    flag: '--engine-metrics-url <url>',
    env: 'DYN_ENGINE_METRICS_URL',
    defaultText: 'none; the embedded engine in demo mode',
    help: "the engine's Prometheus endpoint, scraped for KV-cache usage (authoritative when fresh)",
  },
  engineMetricsFormat: {
    flag: '--engine-metrics-format <format>',
    env: 'DYN_ENGINE_METRICS_FORMAT',
    default: 'auto',
    help: 'vllm | sglang | trtllm-triton | trtllm-serve | auto (detected from metric names)',
  },
  engineLoadSource: {
    flag: '--engine-load-source <source>',
    env: 'DYN_ENGINE_LOAD_SOURCE',
    default: 'auto',
    help: "where kv_used_blocks/kv_total_blocks come from: scrape (the engine's /metrics, needs --engine-metrics-url), getloads (the engine's own GetLoads RPC over the sidecar's engine connection), traffic (none: KV usage unknown, only the Generate traffic's active blocks), auto (scrape when a metrics URL is known, else GetLoads, falling back to traffic when the engine answers UNIMPLEMENTED). active_decode_blocks and active_prefill_tokens always come from the Generate traffic",
  },
  scrapeIntervalMs: {
    flag: '--scrape-interval-ms <ms>',
    env: 'DYN_SCRAPE_INTERVAL_MS',
    default: 250,
    help: 'how often the engine load is read (a metrics scrape or a GetLoads call)',
  },
  generateWire: {
    flag: '--generate-wire <layout>',
    env: 'DYN_GENERATE_WIRE',
    default: 'vllm',
    help: "the engine's gRPC protocol, for token accounting and for what the sidecar asks the engine (model, KV size, max_num_seqs, loads): vllm (SMG's vllm.grpc.engine.VllmEngine, as served by vllm serve --grpc), vllm-legacy (the same service before 2026-01), sglang (SMG's sglang.grpc.scheduler.SglangScheduler), vllm-native (vLLM's own vllm.Inference and vllm.Control, vllm-rs serve --grpc-port), sglang-native (SGLang's own sglang.runtime.v1.SglangService, --grpc-port). Never guessed: calls that do not decode are forwarded untouched and counted",
  },
  trackOutputBlocks: {
    flag: '--track-output-blocks',
    env: 'DYN_TRACK_OUTPUT_BLOCKS',
    default: false,
    help: 'count generated tokens in active_decode_blocks, not only prompt tokens (for long outputs)',
  },
  kvTotalBlocks: { flag: '--kv-total-blocks <n>', env: 'DYN_KV_TOTAL_BLOCKS', help: 'KV-cache size in blocks when the engine scrape does not give it' },
  kvBlockSize: {
    flag: '--kv-block-size <tokens>',
    env: 'DYN_KV_BLOCK_SIZE',
    default: 16,
    help: 'tokens per KV block for active_decode_blocks (a scraped block size wins)',
  },
  maxNumBatchedTokens: {
    flag: '--max-num-batched-tokens <n>',
    env: 'DYN_MAX_NUM_BATCHED_TOKENS',
    help: "the engine's max_num_batched_tokens, published for the frontend's prefill-fraction check",
  },
  dataParallelSize: {
    flag: '--data-parallel-size <n>',
    env: 'DYN_DATA_PARALLEL_SIZE',
    default: 1,
    help: "dp ranks of the engine; one load event per rank. A call's rank: the request's own data_parallel_rank field, else the x-data-parallel-rank header (or the older x-dynamo-dp-rank), else 0",
  },
  servedModelName: {
    flag: '--served-model-name <name>',
    env: 'DYN_SERVED_MODEL_NAME',
    defaultText:
      'asked from the engine once reachable (GetModelInfo of the --generate-wire service: served_model_name, else model_path); null in events until known',
    help: "the model this worker serves, sent as model in load events (vLLM's flag name)",
  },
  natsUrl: {
    flag: '--nats-url <url>',
    env: 'NATS_SERVER',
    defaultText: 'none (no publishing; GET /load still works)',
    help: 'NATS server for load events, e.g. nats://127.0.0.1:4222',
  },
  ...NATS_SECURITY_OPTIONS,
  ...LOAD_SUBJECT_OPTIONS,
  eventFormat: {
    flag: '--event-format <format>',
    env: 'DYN_EVENT_FORMAT',
    default: 'json',
    help:
      "load events on NATS: json (our event with every field, what this project's frontend reads) | dynamo (NVIDIA Dynamo's event plane: a MessagePack EventEnvelope, topic kv_metrics, around an ActiveLoad, for a Dynamo frontend started with DYN_EVENT_PLANE=nats). " +
      "dynamo carries only ActiveLoad (worker_id, dp_rank, active_decode_blocks, active_prefill_tokens, kv_used_blocks), not kv_total_blocks, overloaded, draining, model or grpc_address (a Dynamo frontend gets those from its discovery), so this project's frontend needs json. " +
      'GET /load and WorkerLoad/Watch are unchanged',
  },
  loadHeartbeatMs: {
    flag: '--load-heartbeat-ms <ms>',
    env: 'DYN_LOAD_HEARTBEAT_MS',
    default: 1000,
    help: 'publish the current load at least this often, even when nothing changed',
  },
  natsLivenessTimeoutMs: {
    flag: '--nats-liveness-timeout-ms <ms>',
    env: 'DYN_NATS_LIVENESS_TIMEOUT_MS',
    default: 2000,
    help: 'NATS counts as disconnected when the server has not confirmed published load events (or answered a PING) within this; events count as published only once confirmed',
  },
  workerId: {
    flag: '--worker-id <n>',
    env: 'DYN_WORKER_ID',
    defaultText: 'hash of host name and the bound listen port',
    help: 'worker_id in load events (integer < 2^53); stable across restarts by default',
  },
} as const satisfies Record<string, OptionSpec>;

export type SidecarOptionKey = keyof typeof SIDECAR_OPTIONS;

/**
 * The range of each engine-capacity flag (sidecar-config.ts parses them with it), which what the
 * engine tells of the same thing is held to as well (load/learned-bounds.ts): an engine's dp size
 * of 2^31-1 would otherwise be 2^31 ranks in memory.
 */
export const CAPACITY_BOUNDS = {
  kvTotalBlocks: { min: 1, max: Number.MAX_SAFE_INTEGER },
  kvBlockSize: { min: 1, max: 1 << 20 },
  maxNumBatchedTokens: { min: 1, max: Number.MAX_SAFE_INTEGER },
  // The same cap as the frontend's on the ranks of one worker: one event per rank crosses.
  dataParallelSize: { min: 1, max: MAX_DP_RANKS },
} as const satisfies Partial<Record<SidecarOptionKey, { min: number; max: number }>>;

/** Commander stores `--engine-request-limit` as `engineRequestLimit`; the table keys are those names. */
export type RawFlags = Partial<Record<SidecarOptionKey, string | boolean | undefined>>;
