/**
 * The frontend's options, in one table: flag, environment twin, default and help text. The
 * `frontend` command builds its commander options from it and `parseFrontendConfig` validates
 * the same keys, so a flag cannot exist without its env twin or its help line. Each typed
 * `default` is the one the parser gives and the one --help shows. Threshold and router names
 * follow Dynamo's frontend (`python -m dynamo.frontend`) so launch lines carry over.
 */
import type { OptionSpec } from '../platform/config/option-spec.js';
import { LOAD_SUBJECT_OPTIONS } from '../protocol/load-event.js';
import { NATS_SECURITY_OPTIONS } from '../platform/nats-security.js';
import { GRPC_DEFAULT_MAX_RECEIVE_BYTES } from '../protocol/grpc/framing.js';

export const FRONTEND_OPTIONS = {
  httpHost: { flag: '--http-host <host>', env: 'DYN_HTTP_HOST', default: '0.0.0.0', help: 'address of the OpenAI-compatible HTTP server' },
  httpPort: {
    flag: '--http-port <port>',
    env: 'DYN_HTTP_PORT',
    default: 8000,
    help: 'port of the HTTP server (API, /busy_threshold, /metrics, /live, /ready); 0 picks a free port',
  },
  workers: {
    flag: '--worker <host:port>',
    env: 'DYN_FRONTEND_WORKERS',
    defaultText: 'none',
    help: "a worker's sidecar (gRPC), repeatable (env: comma-separated); its load is pushed by the sidecar over that address (no broker needed)",
  },
  natsUrl: {
    flag: '--nats-url <url>',
    env: 'NATS_SERVER',
    defaultText: 'none',
    help: "NATS server to read the sidecars' load events from; workers appear with their first event",
  },
  ...NATS_SECURITY_OPTIONS,
  ...LOAD_SUBJECT_OPTIONS,
  routerMode: {
    flag: '--router-mode <mode>',
    env: 'DYN_ROUTER_MODE',
    default: 'predicted-ttft',
    help: "predicted-ttft (lowest predicted_ttft_ms of the sidecars' load events, corrected for the calls sent to each worker since its event; unknown predictions count as the best known, none known at all: least-loaded) | round-robin | random | least-loaded | kv (least KV usage, counting this frontend's in-flight blocks); busy detection works in every mode",
  },
  routerTrackOutputBlocks: {
    flag: '--router-track-output-blocks',
    env: 'DYN_ROUTER_TRACK_OUTPUT_BLOCKS',
    default: false,
    help: "kv mode: count generated tokens in this frontend's in-flight blocks, not only prompt tokens",
  },
  kvBlockSize: { flag: '--kv-block-size <tokens>', env: 'DYN_KV_BLOCK_SIZE', default: 16, help: "tokens per KV block for kv mode's in-flight block count" },
  activeDecodeBlocksThreshold: {
    flag: '--active-decode-blocks-threshold <fraction>',
    env: 'DYN_ACTIVE_DECODE_BLOCKS_THRESHOLD',
    defaultText: 'unset (check off)',
    help: 'busy when (kv_used_blocks or active_decode_blocks) > this * kv_total_blocks; 0..1, "None" = off',
  },
  activePrefillTokensThreshold: {
    flag: '--active-prefill-tokens-threshold <tokens>',
    env: 'DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD',
    defaultText: 'unset (check off)',
    help: 'busy when active_prefill_tokens > this; integer >= 0, "None" = off',
  },
  activePrefillTokensThresholdFrac: {
    flag: '--active-prefill-tokens-threshold-frac <fraction>',
    env: 'DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC',
    defaultText: 'unset (check off)',
    help: 'busy when active_prefill_tokens > this * max_num_batched_tokens; >= 0, "None" = off',
  },
  ttftSloMs: {
    flag: '--ttft-slo-ms <ms>',
    env: 'DYN_FRONTEND_TTFT_SLO_MS',
    defaultText: 'unset (check off)',
    help: "the time-to-first-token SLO: a worker is busy for a request whose predicted TTFT there exceeds it, and a request no worker can serve within it gets 529 at once. The prediction is the request's own where the worker's sidecar runs with --ttft-slo-ms (its published prefill model, the prefill ahead, this prompt; the same function the sidecar admits by), else the worker's predicted_ttft_ms (an unknown prediction is never busy). A request's x-slo-ttft-ms header may tighten it, never loosen it. Integer 1..3600000; not settable through /busy_threshold",
  },
  maxPredictedTtftMs: {
    flag: '--max-predicted-ttft-ms <ms>',
    env: 'DYN_MAX_PREDICTED_TTFT_MS',
    defaultText: 'unset (check off)',
    help: 'the older name of --ttft-slo-ms (docs/decisions.md); 0 = off. Giving both with different values is an error',
  },
  priorityThresholdScale: {
    flag: '--priority-threshold-scale <list>',
    env: 'DYN_PRIORITY_THRESHOLD_SCALE',
    defaultText: 'none: every priority at scale 1',
    help: 'priority classes as PRIORITY=SCALE pairs, e.g. "1=0.8,5=0.5": a request\'s class is the largest PRIORITY <= its priority (below all: scale 1), and every busy threshold (--max-predicted-ttft-ms too) is multiplied by its SCALE (0 < SCALE <= 10), so with SCALE < 1 workers are busy for that class sooner; per model through /busy_threshold (priority_threshold_scales)',
  },
  defaultPriority: {
    flag: '--default-priority <int>',
    env: 'DYN_DEFAULT_PRIORITY',
    default: 0,
    help: "priority of a request that gives none (neither the x-request-priority header nor the body's priority field); an int32, lower runs sooner (vLLM's order)",
  },
  admissionControl: {
    flag: '--admission-control <mode>',
    env: 'DYN_ADMISSION_CONTROL',
    help: 'accepted for Dynamo launch lines and ignored with a warning: set the thresholds you want instead',
  },
  overloadStatus: {
    env: 'DYN_HTTP_OVERLOAD_STATUS_CODE',
    default: 529,
    help: 'HTTP status of overload rejections, 200-999; anything else falls back to 529 with a startup warning',
  },
  retryAfterS: {
    flag: '--retry-after-s <s>',
    env: 'DYN_HTTP_RETRY_AFTER_S',
    default: 1,
    help: 'Retry-After header (seconds) on overload rejections',
  },
  overloadLeaseMs: {
    flag: '--overload-lease-ms <ms>',
    env: 'DYN_OVERLOAD_LEASE_MS',
    // Dynamo's PR 14210 gave the worker-overloaded mark a 1 s lease; we keep its length.
    default: 1000,
    help: 'a worker whose sidecar answered RESOURCE_EXHAUSTED (or UNAVAILABLE) gets no traffic for this long, unless its next load event says it has room',
  },
  loadHeartbeatMs: {
    flag: '--load-heartbeat-ms <ms>',
    env: 'DYN_LOAD_HEARTBEAT_MS',
    default: 1000,
    help: 'heartbeat assumed for workers whose events do not carry heartbeat_ms; load older than 3 heartbeats is unknown (free), a NATS worker silent for 10 is forgotten',
  },
  maxWorkers: {
    flag: '--max-workers <n>',
    env: 'DYN_FRONTEND_MAX_WORKERS',
    default: 4096,
    help: 'most workers the frontend keeps; events from further new workers are refused and counted (a rogue publisher cannot grow memory or /metrics without bound)',
  },
  tenantMaxInflight: {
    flag: '--tenant-max-inflight <n>',
    env: 'DYN_TENANT_MAX_INFLIGHT',
    default: 0,
    help: "most requests one tenant (x-tenant-id, else the body's user) may have in flight at this frontend; one more gets 429 with Retry-After; requests with no tenant are not capped; 0 = no cap",
  },
  metricsMaxTenants: {
    flag: '--metrics-max-tenants <k>',
    env: 'DYN_METRICS_MAX_TENANTS',
    default: 20,
    help: 'tenants with a metrics label of their own (the first K seen); later ones are counted as tenant="other"',
  },
  tokenizer: {
    flag: '--tokenizer <path>',
    env: 'DYN_TOKENIZER',
    defaultText: "the simulated engine's (one token per whitespace word)",
    help: 'a HuggingFace tokenizer.json (or the folder holding it) to tokenize prompts and decode outputs with',
  },
  maxBodyBytes: {
    flag: '--max-body-bytes <n>',
    env: 'DYN_HTTP_MAX_BODY_BYTES',
    // Half the message limit: with the default tokenizer any body up to it makes a Generate message that fits (docs/frontend.md, "Prompt size").
    default: GRPC_DEFAULT_MAX_RECEIVE_BYTES / 2,
    help: 'largest request body accepted (413 beyond, before it is read); up to half of --worker-max-message-bytes, every prompt the default tokenizer reads fits a worker message',
  },
  workerMaxMessageBytes: {
    flag: '--worker-max-message-bytes <n>',
    env: 'DYN_FRONTEND_WORKER_MAX_MESSAGE_BYTES',
    default: GRPC_DEFAULT_MAX_RECEIVE_BYTES,
    help: "largest gRPC message the workers' engines accept (gRPC's default receive limit); a prompt whose Generate message would be larger gets 413 without reaching a worker",
  },
  tokenizerThreads: {
    flag: '--tokenizer-threads <n>',
    env: 'DYN_FRONTEND_TOKENIZER_THREADS',
    default: 2,
    help: 'threads that tokenize prompts, so a large one never stalls the event loop (small ones stay on it); 0 = all on the event loop',
  },
  adminAddress: {
    flag: '--admin-address <host:port>',
    env: 'DYN_FRONTEND_ADMIN_ADDRESS',
    defaultText: 'none: the admin API is on the HTTP port',
    help: 'serve /busy_threshold on this address only (e.g. 127.0.0.1:8001) instead of the HTTP port',
  },
  disableAdminApi: {
    env: 'DYN_DISABLE_FRONTEND_ADMIN_API',
    default: false,
    help: 'true: no /busy_threshold routes (404)',
  },
  requestTimeoutMs: {
    flag: '--request-timeout-ms <ms>',
    env: 'DYN_HTTP_REQUEST_TIMEOUT_MS',
    defaultText: '0 (none)',
    help: "deadline of each worker call (queueing at the sidecar included), sent as the gRPC deadline; past it the client gets 504 and the worker's slot is freed; 0 = none",
  },
  shutdownGraceMs: {
    flag: '--shutdown-grace-ms <ms>',
    env: 'DYN_FRONTEND_SHUTDOWN_GRACE_MS',
    default: 10_000,
    help: 'on SIGTERM, how long requests in progress (streams included) may run before their connections are closed (which cancels their worker calls)',
  },
  // What one client may hold of the HTTP listeners (http/server-limits.ts); both timeouts answer 408 and close the connection.
  httpReceiveTimeoutMs: {
    flag: '--http-receive-timeout-ms <ms>',
    env: 'DYN_HTTP_RECEIVE_TIMEOUT_MS',
    default: 60_000,
    help: 'time a client has to send a whole request, headers and body; past it 408 and the connection is closed. Answers (streams too) are not limited; 0 = none',
  },
  httpHeadersTimeoutMs: {
    flag: '--http-headers-timeout-ms <ms>',
    env: 'DYN_HTTP_HEADERS_TIMEOUT_MS',
    default: 10_000,
    help: "time a client has to send a request's headers (a new connection: its first byte too); past it 408 and the connection is closed; at most --http-receive-timeout-ms (left unset, it shrinks to a shorter one); 0 = none",
  },
  httpMaxConnections: {
    flag: '--http-max-connections <n>',
    env: 'DYN_HTTP_MAX_CONNECTIONS',
    default: 10_000,
    help: 'most client connections open at once on each HTTP listener (SSE streams hold one each); further ones are closed unanswered and counted; 0 = no cap',
  },
  logLevel: { flag: '--log-level <level>', env: 'DYN_LOG_LEVEL', default: 'info', help: 'debug | info | warn | error (JSON lines on stderr)' },
  // TLS (docs/operations/tls.md): every listener and client is plaintext unless given its files.
  tlsCert: {
    flag: '--tls-cert <file>',
    env: 'DYN_HTTP_TLS_CERT',
    defaultText: 'none: HTTP',
    help: 'certificate chain (PEM) of the HTTP server (and of --admin-address): HTTPS, HTTP/1.1 as OpenAI clients speak it; needs --tls-key',
  },
  tlsKey: { flag: '--tls-key <file>', env: 'DYN_HTTP_TLS_KEY', defaultText: 'none', help: 'unencrypted PEM private key of --tls-cert' },
  tlsClientCa: {
    flag: '--tls-client-ca <file>',
    env: 'DYN_HTTP_TLS_CLIENT_CA',
    defaultText: 'none: client certificates not asked',
    help: 'CA bundle (PEM): every HTTP client (admin too) must present a certificate signed by it (mTLS), else its handshake fails; needs --tls-cert',
  },
  workerTls: {
    flag: '--worker-tls',
    env: 'DYN_FRONTEND_WORKER_TLS',
    default: false,
    help: "gRPC over TLS to the workers' sidecars (Generate calls and WorkerLoad pushes), verifying their certificates",
  },
  workerCa: {
    flag: '--worker-ca <file>',
    env: 'DYN_FRONTEND_WORKER_CA',
    defaultText: 'the system CAs',
    help: "CA bundle (PEM) the sidecars' certificates must chain to; needs --worker-tls",
  },
  workerCert: {
    flag: '--worker-cert <file>',
    env: 'DYN_FRONTEND_WORKER_CERT',
    defaultText: 'none',
    help: 'client certificate chain (PEM) presented to sidecars that verify clients (mTLS); needs --worker-key and --worker-tls',
  },
  workerKey: { flag: '--worker-key <file>', env: 'DYN_FRONTEND_WORKER_KEY', defaultText: 'none', help: 'unencrypted PEM private key of --worker-cert' },
  workerServerName: {
    flag: '--worker-server-name <name>',
    env: 'DYN_FRONTEND_WORKER_SERVER_NAME',
    defaultText: "each worker's host",
    help: "name sent as SNI and required in every sidecar's certificate (one name for all workers); needs --worker-tls",
  },
  tlsReloadIntervalMs: {
    flag: '--tls-reload-interval-ms <ms>',
    env: 'DYN_TLS_RELOAD_INTERVAL_MS',
    default: 5000,
    help: 'how often certificate files are read for changes (Kubernetes secret rotation); changed files are checked and used for new connections, existing ones keep theirs; 0 = never',
  },
} as const satisfies Record<string, OptionSpec>;

export type FrontendOptionKey = keyof typeof FRONTEND_OPTIONS;

/** What commander hands the action: strings and switches, and the repeatable --worker as a list. */
export type FrontendRawFlags = Partial<Record<Exclude<FrontendOptionKey, 'workers'>, string | boolean | undefined>> & { workers?: string[] | undefined };
