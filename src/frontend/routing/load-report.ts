/**
 * One worker rank's load as the frontend reads it, from either source: a JSON load event on
 * NATS or an update of the sidecar's WorkerLoad.Watch push stream. Both go through
 * `parseRankReport`, so the two sources cannot disagree on what a field means.
 *
 * Tolerant where Dynamo is: every load number is optional (a Dynamo ActiveLoad carries only
 * worker_id, dp_rank and some of the three counters). Strict where a wrong value would route
 * wrongly: worker_id must be an unsigned integer (number or decimal string, u64 ids exceed JSON's
 * safe integers), counters must be finite and >= 0, the address must be host:port.
 */
import { blocksFor, predictTtftMs, prefillModelOf, type PrefillModel } from '../../protocol/ttft-prediction.js';

export interface RankReport {
  /** Decimal string: u64 ids beyond 2^53 stay exact. */
  readonly workerId: string;
  readonly dpRank: number;
  readonly activeDecodeBlocks: number | undefined;
  readonly activePrefillTokens: number | undefined;
  readonly kvUsedBlocks: number | undefined;
  readonly kvTotalBlocks: number | undefined;
  readonly maxNumBatchedTokens: number | undefined;
  /** The sidecar's own flag: its gate is full or it just rejected a call. */
  readonly overloaded: boolean;
  /**
   * While overloaded, for whom (overloaded_priority, overloaded_tenants): calls of this priority
   * or less urgent, of these tenants ("" for none); undefined: every priority, every tenant (a
   * Dynamo worker, an older sidecar, or a value not understood: the cautious reading).
   */
  readonly overloadScope: OverloadScope | undefined;
  readonly draining: boolean;
  readonly model: string | undefined;
  readonly grpcAddress: string | undefined;
  readonly heartbeatMs: number | undefined;
  /** Calls in the engine and queued at the sidecar, when it says (least-loaded routing). */
  readonly engineRequest: number | undefined;
  readonly requestQueue: number | undefined;
  /** The sidecar's engine request limit N in force, when it says (status page; null = admission off). */
  readonly engineRequestLimit: number | undefined;
  /**
   * The sidecar's predicted_ttft_ms: how long a call arriving when the event was taken would wait
   * for its first token. undefined when absent, null or not believable (see predictedTtftOf).
   */
  readonly predictedTtftMs: number | undefined;
  /**
   * With the sidecar's --ttft-slo-ms: its learned prefill model, the prefill tokens ahead, and the
   * KV blocks free after reservations (with their block size), from which requestTtftMs predicts
   * a request's own TTFT. undefined when absent or not believable.
   */
  readonly ttftModel: PrefillModel | undefined;
  readonly prefillTokensAhead: number | undefined;
  readonly kvFreeBlocks: number | undefined;
  readonly kvBlockSize: number | undefined;
  /**
   * How many more calls the worker admits now (admit_now), clamped to its own N + Q; undefined
   * when it does not say, or says without an N (a credit past a limit it has not stated is not
   * trusted): then the frontend routes it without credits (worker-credit.ts).
   */
  readonly admitNow: number | undefined;
  /** The event's sequence and timestamp_ms, by which a credit report older than the last is ignored. */
  readonly sequence: number | undefined;
  readonly timestampMs: number | undefined;
}

/** admit_now, trusted up to the worker's own N + Q and no further; not a number, or no N: undefined. */
function admitNowOf(record: Record<string, unknown>, limit: number | undefined): number | undefined {
  const raw = record['admit_now'];
  const credit = typeof raw === 'string' && /^\d{1,20}$/.test(raw) ? Number(raw) : raw;
  if (limit === undefined || typeof credit !== 'number' || Number.isNaN(credit)) return undefined;
  const queueLimit = adviceOf(record['request_queue_limit']) ?? 0;
  return Math.floor(Math.min(Math.max(credit, 0), limit + queueLimit));
}

/**
 * The TTFT a request of `promptTokens` would see at this rank, by the sidecar's own prediction
 * (ttft-prediction.ts) with `sentTokens` more prefill ahead (what this frontend sent since the
 * report, which the report cannot include); a request whose blocks do not fit the free KV waits
 * for room, which the report's predicted_ttft_ms stands for. Without a published model, the
 * report's predicted_ttft_ms; undefined when neither is known.
 */
export function requestTtftMs(report: RankReport, promptTokens: number, sentTokens = 0): number | undefined {
  const model = report.ttftModel;
  if (!model) return report.predictedTtftMs;
  const predicted = predictTtftMs(model, { prefillTokensAhead: (report.prefillTokensAhead ?? 0) + sentTokens, promptTokens });
  const fits = report.kvFreeBlocks === undefined || report.kvBlockSize === undefined || blocksFor(promptTokens, report.kvBlockSize) <= report.kvFreeBlocks;
  return fits ? predicted : Math.max(predicted, report.predictedTtftMs ?? 0);
}

/** Whom a worker's overload refuses: calls of `priority` or less urgent (-Infinity: all), of `tenants` (null: all). */
export interface OverloadScope {
  readonly priority: number;
  readonly tenants: ReadonlySet<string> | null;
}

/** The most tenants an event may name; more reads as every tenant. */
const MAX_OVERLOADED_TENANTS = 64;

/** overloaded_priority and overloaded_tenants: advice, so a value not understood widens to everyone instead of dropping the event. */
function overloadScopeOf(record: Record<string, unknown>): OverloadScope | undefined {
  if (record['overloaded'] !== true) return undefined;
  const priority = record['overloaded_priority'];
  const tenants = record['overloaded_tenants'];
  const listed =
    Array.isArray(tenants) && tenants.length > 0 && tenants.length <= MAX_OVERLOADED_TENANTS && tenants.every((t) => typeof t === 'string')
      ? new Set(tenants)
      : null;
  const known = typeof priority === 'number' && Number.isInteger(priority);
  if (!known && listed === null) return undefined;
  return { priority: known ? priority : -Infinity, tenants: listed };
}

export class InvalidLoadReportError extends Error {
  override readonly name = 'InvalidLoadReportError';
}

const MIN_HEARTBEAT_MS = 10;
const MAX_HEARTBEAT_MS = 3_600_000;

/**
 * Beyond this a prediction is not believed (an hour to a first token is no estimate a router can
 * use; the wire's uint32 allows 49 days).
 */
export const MAX_PREDICTED_TTFT_MS = 3_600_000;

const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;

function optionalCount(record: Record<string, unknown>, field: string): number | undefined {
  const value = record[field];
  if (value === undefined || value === null) return undefined;
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) throw new InvalidLoadReportError(`${field} must be a number >= 0, got ${JSON.stringify(value)}`);
  return n;
}

/**
 * predicted_ttft_ms is advice, not load: a value that is not a number in 0..MAX_PREDICTED_TTFT_MS
 * (negative, NaN, infinite, absurd, a non-numeric string, an object) reads as unknown instead of
 * refusing the whole event, so one bad estimate cannot hide the counters the busy checks need.
 * Unknown is never busy and never starves the worker (router.ts).
 */
function predictedTtftOf(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 && n <= MAX_PREDICTED_TTFT_MS ? n : undefined;
}

/** Advice fields (as predicted_ttft_ms): a value not understood reads as unknown instead of refusing the event. */
function adviceOf(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER ? n : undefined;
}

const positive = (n: number | undefined): number | undefined => (n === undefined || n === 0 ? undefined : n);

function optionalString(record: Record<string, unknown>, field: string): string | undefined {
  const value = record[field];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new InvalidLoadReportError(`${field} must be a string, got ${JSON.stringify(value)}`);
  return value;
}

function workerIdOf(value: unknown): string {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === 'string' && /^\d{1,20}$/.test(value) && BigInt(value) < 2n ** 64n) return BigInt(value).toString();
  if (typeof value === 'bigint' && value >= 0n && value < 2n ** 64n) return value.toString();
  throw new InvalidLoadReportError(`worker_id must be an unsigned 64-bit integer, got ${JSON.stringify(typeof value === 'bigint' ? String(value) : value)}`);
}

/** Parses one rank's event (snake_case wire fields); throws InvalidLoadReportError naming the field. */
export function parseRankReport(value: unknown): RankReport {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidLoadReportError('a load event must be a JSON object');
  const record = value as Record<string, unknown>;
  const workerId = workerIdOf(record['worker_id']);
  const dpRank = optionalCount(record, 'dp_rank') ?? 0;
  if (!Number.isInteger(dpRank) || dpRank > 65535)
    throw new InvalidLoadReportError(`dp_rank must be an integer in 0..65535, got ${JSON.stringify(record['dp_rank'])}`);
  const grpcAddress = optionalString(record, 'grpc_address');
  if (grpcAddress !== undefined) {
    const match = HOST_PORT.exec(grpcAddress);
    if (!match || Number(match[1]) < 1 || Number(match[1]) > 65535)
      throw new InvalidLoadReportError(`grpc_address must be host:port, got ${JSON.stringify(grpcAddress)}`);
  }
  const heartbeatMs = optionalCount(record, 'heartbeat_ms');
  const engineRequestLimit = optionalCount(record, 'engine_request_limit');
  // The sidecar's own range (--load-heartbeat-ms): staleness and forgetting are counted in the
  // worker's heartbeats, so one event saying 1e15 would keep its load fresh for ever.
  if (heartbeatMs !== undefined && heartbeatMs !== 0 && !(heartbeatMs >= MIN_HEARTBEAT_MS && heartbeatMs <= MAX_HEARTBEAT_MS)) {
    throw new InvalidLoadReportError(
      `heartbeat_ms must be 0 (unknown) or in ${MIN_HEARTBEAT_MS}..${MAX_HEARTBEAT_MS}, got ${JSON.stringify(record['heartbeat_ms'])}`,
    );
  }
  return {
    workerId,
    dpRank,
    activeDecodeBlocks: optionalCount(record, 'active_decode_blocks'),
    activePrefillTokens: optionalCount(record, 'active_prefill_tokens'),
    kvUsedBlocks: optionalCount(record, 'kv_used_blocks'),
    kvTotalBlocks: optionalCount(record, 'kv_total_blocks'),
    maxNumBatchedTokens: optionalCount(record, 'max_num_batched_tokens'),
    overloaded: record['overloaded'] === true,
    overloadScope: overloadScopeOf(record),
    draining: record['draining'] === true,
    model: optionalString(record, 'model'),
    grpcAddress,
    heartbeatMs: heartbeatMs === undefined || heartbeatMs === 0 ? undefined : heartbeatMs,
    engineRequest: optionalCount(record, 'engine_request'),
    requestQueue: optionalCount(record, 'request_queue'),
    engineRequestLimit,
    predictedTtftMs: predictedTtftOf(record['predicted_ttft_ms']),
    ttftModel: prefillModelOf(adviceOf(record['ttft_base_ms']), adviceOf(record['prefill_tokens_per_s'])),
    prefillTokensAhead: adviceOf(record['prefill_tokens_ahead']),
    kvFreeBlocks: adviceOf(record['kv_free_blocks']),
    kvBlockSize: positive(adviceOf(record['kv_block_size'])),
    admitNow: admitNowOf(record, engineRequestLimit),
    sequence: adviceOf(record['sequence']),
    timestampMs: adviceOf(record['timestamp_ms']),
  };
}
