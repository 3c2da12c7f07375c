/**
 * The load event as it travels: the JSON a sidecar publishes per dp rank (Dynamo's ActiveLoad
 * field names plus ours), the subject it is published on, and the header that picks a call's dp
 * rank. Sidecars write these and frontends read them; neither owns them.
 */
import type { OptionSpec } from '../platform/config/option-spec.js';

/** The dp rank of a call as gRPC metadata, the name Dynamo's gRPC sidecars send. */
export const DP_RANK_HEADER = 'x-data-parallel-rank';
/** This project's first name for it, still read by sidecars (frontends send DP_RANK_HEADER). */
export const LEGACY_DP_RANK_HEADER = 'x-dynamo-dp-rank';

/**
 * The most dp ranks one worker may have: the sidecar's --data-parallel-size bound, and how many
 * ranks a frontend keeps per worker (more are refused, so one worker's reports cannot grow the
 * frontend's memory, /metrics and the time each update takes without bound).
 */
export const MAX_DP_RANKS = 1024;

/** Field names are the wire contract (Dynamo's ActiveLoad plus ours); do not rename. */
export interface LoadEvent {
  worker_id: number;
  dp_rank: number;
  active_decode_blocks: number;
  active_prefill_tokens: number;
  kv_used_blocks: number | null;
  kv_total_blocks: number | null;
  max_num_batched_tokens: number | null;
  engine_request: number;
  request_queue: number;
  engine_request_limit: number | null;
  overloaded: boolean;
  /**
   * While overloaded, for whom: calls of this priority or less urgent (null: every priority) ...
   * (x-request-priority; lower is more urgent) ...
   */
  overloaded_priority: number | null;
  /** ... of these tenants (x-tenant-id; "" for calls without one; null: every tenant). Both null when not overloaded. */
  overloaded_tenants: string[] | null;
  draining: boolean;
  timestamp_ms: number;
  sequence: number;
  /** The model the worker serves; null until known. */
  model: string | null;
  /** host:port where frontends reach this sidecar's gRPC ingress. */
  grpc_address: string;
  /** An event (or push update) comes at least this often. */
  heartbeat_ms: number;
  /**
   * How long a call arriving now would wait for its first token, in ms, by the sidecar's own
   * estimate: its expected wait for room (0 when it would be admitted at once) plus the recent
   * mean time from an engine slot to the first token. null until a first token has been seen.
   * Taken when the event is; frontends route by it (lowest first) and may call a worker busy
   * above --max-predicted-ttft-ms.
   */
  predicted_ttft_ms: number | null;
  /**
   * With --ttft-slo-ms (absent or null otherwise): what a frontend needs to predict the TTFT of a
   * request of its own length with the sidecar's own function (ttft-prediction.ts): the prefill
   * tokens admitted or queued without a first token, the learned model (ttft_base_ms and
   * prefill_tokens_per_s, null until learned), and the KV blocks free after reservations with the
   * rank's block size.
   */
  prefill_tokens_ahead?: number | null;
  ttft_base_ms?: number | null;
  prefill_tokens_per_s?: number | null;
  kv_free_blocks?: number | null;
  kv_block_size?: number | null;
  /**
   * How many more calls the worker admits right now: its free engine slots (none while its
   * budget refuses a call at once) plus the queue places it would not refuse; null when admission
   * is off. A frontend sends no more than this until the next event (worker-credit.ts), so it
   * hears "no" from the event instead of from a refused call.
   */
  admit_now?: number | null;
  /** The sidecar's queue limit Q (null when admission is off): a frontend trusts admit_now up to N + Q. */
  request_queue_limit?: number | null;
}

/** The fields of LoadEvent that admission by work (--ttft-slo-ms) fills in. */
export type WorkLoadFields = Pick<LoadEvent, 'prefill_tokens_ahead' | 'ttft_base_ms' | 'prefill_tokens_per_s' | 'kv_free_blocks' | 'kv_block_size'>;

export class InvalidSubjectNameError extends Error {
  override readonly name = 'InvalidSubjectNameError';
}

/**
 * Escapes one subject token: [A-Za-z0-9_-] stay, every other character becomes %XX per UTF-8
 * byte (so '.', '*', '>', whitespace and '%' itself). Injective, so two different names can
 * never share a subject, and usual names (`dynamo`, `backend`, `generate`) are unchanged.
 */
export function escapeSubjectToken(name: string): string {
  if (name === '') throw new InvalidSubjectNameError('subject name segment must not be empty');
  return name.replace(/[^A-Za-z0-9_-]/gu, (ch) => [...Buffer.from(ch, 'utf8')].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join(''));
}

export function loadSubject(namespace: string, component: string, endpoint: string): string {
  return `namespace.${escapeSubjectToken(namespace)}.component.${escapeSubjectToken(component)}.endpoint.${escapeSubjectToken(endpoint)}.kv_metrics`;
}

/** The subject's three names, as options: the sidecar publishes on them and the frontend reads them, so both commands take the same flags. */
export const LOAD_SUBJECT_OPTIONS = {
  namespace: {
    flag: '--namespace <name>',
    env: 'DYN_NAMESPACE',
    default: 'dynamo',
    help: 'load subject namespace.{ns}.component.{component}.endpoint.{endpoint}.kv_metrics (the same on sidecars and frontends)',
  },
  component: { flag: '--component <name>', env: 'DYN_COMPONENT', default: 'backend', help: 'subject component segment' },
  endpoint: { flag: '--endpoint <name>', env: 'DYN_ENDPOINT', default: 'generate', help: 'subject endpoint segment' },
} as const satisfies Record<string, OptionSpec>;
