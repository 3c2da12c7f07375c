/**
 * The engine's own load report, read as one more source for the EngineScraper loop: GetLoads of
 * SMG's protocols (vLLM `vllm.grpc.engine.VllmEngine/GetLoads`, SGLang
 * `sglang.grpc.scheduler.SglangScheduler/GetLoads`; the same message numbers in both), or
 * SGLang's own `sglang.runtime.v1.SglangService/GetLoad`, whose json_info is a JSON array of the
 * same per-rank fields by name. vLLM's own protocol has no load RPC (getLoadsPath: undefined).
 *
 *   new EngineScraper({ url: path, read: getLoadsReader({ engine, wire, kvBlockSize, kvTotalBlocks }), ... })
 *
 * It is asked over the proxy's own engine connection, outside the admission gate (never a slot,
 * never counted as a proxied call), like GetModelInfo. UNIMPLEMENTED ends the source
 * (LoadSourceUnsupportedError); any other failure is one failed read.
 *
 * From a SchedulerLoad to our ScrapedLoad, with the block size of --kv-block-size (GetLoads
 * reports tokens, not blocks):
 * - max_total_num_tokens > 0 (SGLang): kvTotalBlocks = floor(max_total / block_size),
 *   kvUsedBlocks = ceil(num_used_tokens / block_size).
 * - otherwise (vLLM fills only token_usage, its KV usage ratio): kvUsedBlocks =
 *   round(token_usage * --kv-total-blocks) when that flag is set, else unknown; the ratio is
 *   kept either way (dynamo_sidecar_engine_kv_usage_ratio).
 * - num_running_reqs / num_waiting_reqs as running / waiting.
 * - kvTotalBlocks goes to `accept` (the range of --kv-total-blocks): one refused is left out.
 */
import { ENGINE_PATHS, type GenerateWire } from '../../protocol/engine/generate-wire.js';
import { ANY_POSITIVE, sglangJsonInfo, type AcceptFact } from '../../protocol/engine/engine-facts.js';
import { vllmEngineMessage, type GetLoadsResponseMessage, type SchedulerLoadMessage } from '../../protocol/engine/engine-proto.js';
import { GrpcStatus, statusName } from '../../protocol/grpc/status.js';
import { unaryCall, type OpenStream } from '../../protocol/grpc/unary-call.js';
import type { ScrapedLoad } from './engine-metrics-reader.js';
import { LoadSourceUnsupportedError, ScrapeError, type LoadRead } from './engine-scraper.js';

export interface GetLoadsReaderOptions {
  /** Opens a stream on the engine connection (UpstreamPool.request). */
  readonly open: OpenStream;
  readonly wire: GenerateWire;
  readonly kvBlockSize: number;
  /** --kv-total-blocks or the engine's word, to turn a usage ratio into blocks when the engine gives no token counts. */
  readonly kvTotalBlocks: () => number | undefined;
  readonly timeoutMs: number;
}

/** An empty GetLoadsRequest: every rank, the default sections. */
const EMPTY_REQUEST = new Uint8Array(0);

/** The protocol's load RPC; undefined when it has none. */
export function getLoadsPath(wire: GenerateWire): string | undefined {
  return ENGINE_PATHS[wire].loads;
}

export function getLoadsReader(options: GetLoadsReaderOptions): LoadRead {
  const path = getLoadsPath(options.wire);
  if (path === undefined) throw new Error(`--generate-wire ${options.wire} has no load RPC`);
  const decode =
    options.wire === 'sglang-native'
      ? (body: Buffer, blockSize: number, kvTotalBlocks: number | undefined, accept: AcceptFact) =>
          schedulerLoads(sglangLoads(body), blockSize, kvTotalBlocks, accept)
      : decodeGetLoads;
  return async (signal, accept = ANY_POSITIVE) => {
    const outcome = await unaryCall(options.open, path, EMPTY_REQUEST, { timeoutMs: options.timeoutMs, signal });
    if (outcome.status === GrpcStatus.UNIMPLEMENTED) throw new LoadSourceUnsupportedError(`${path}: UNIMPLEMENTED ${outcome.message}`.trim());
    if (outcome.status !== GrpcStatus.OK) throw new ScrapeError(`${path}: ${statusName(outcome.status)} ${outcome.message}`.trim());
    try {
      return decode(outcome.body ?? Buffer.alloc(0), options.kvBlockSize, options.kvTotalBlocks(), accept);
    } catch (err) {
      throw new ScrapeError(`${path}: undecodable GetLoadsResponse: ${(err as Error).message}`);
    }
  };
}

/** A GetLoadsResponse's bytes as the message (vLLM's and SGLang's number alike); throws on bytes that are not one. */
export function getLoadsResponse(body: Buffer): GetLoadsResponseMessage {
  return vllmEngineMessage<GetLoadsResponseMessage>('GetLoadsResponse').deserialize(body);
}

/** A GetLoadsResponse's bytes to per-rank loads; throws on bytes that are not one. */
export function decodeGetLoads(
  body: Buffer,
  blockSize: number,
  kvTotalBlocks: number | undefined,
  accept?: AcceptFact,
): { ranks: Map<number, ScrapedLoad>; problems: string[] } {
  const response = getLoadsResponse(body);
  return schedulerLoads(response.loads ?? [], blockSize, kvTotalBlocks, accept);
}

/**
 * SGLang's GetLoadResponse { json_info 1 }: a JSON array with one object per rank, named as
 * SchedulerLoad's fields. A field that is not a finite number reads as 0 (SchedulerLoad's
 * default), so schedulerLoads treats it as not reported; a non-array throws.
 */
export function sglangLoads(body: Buffer): SchedulerLoadMessage[] {
  const parsed = sglangJsonInfo(body, 'GetLoadResponse');
  if (!Array.isArray(parsed)) throw new Error('json_info is not a JSON array');
  const num = (entry: Record<string, unknown>, key: string): number => {
    const v = entry[key];
    return typeof v === 'number' && Number.isFinite(v) ? v : 0;
  };
  return parsed
    .filter((entry): entry is Record<string, unknown> => typeof entry === 'object' && entry !== null)
    .map((entry) => ({
      dp_rank: typeof entry['dp_rank'] === 'number' ? entry['dp_rank'] : -1,
      num_running_reqs: num(entry, 'num_running_reqs'),
      num_waiting_reqs: num(entry, 'num_waiting_reqs'),
      num_total_reqs: num(entry, 'num_total_reqs'),
      num_used_tokens: num(entry, 'num_used_tokens'),
      max_total_num_tokens: num(entry, 'max_total_num_tokens'),
      token_usage: num(entry, 'token_usage'),
      gen_throughput: num(entry, 'gen_throughput'),
      cache_hit_rate: num(entry, 'cache_hit_rate'),
      utilization: num(entry, 'utilization'),
      max_running_requests: num(entry, 'max_running_requests'),
    }));
}

/** Per-rank ScrapedLoad from GetLoads entries; entries with a negative rank are skipped as problems. */
export function schedulerLoads(
  loads: readonly SchedulerLoadMessage[],
  blockSize: number,
  kvTotalBlocks: number | undefined,
  accept: AcceptFact = ANY_POSITIVE,
): { ranks: Map<number, ScrapedLoad>; problems: string[] } {
  const ranks = new Map<number, ScrapedLoad>();
  const problems: string[] = [];
  for (const load of loads) {
    if (!Number.isInteger(load.dp_rank) || load.dp_rank < 0) {
      problems.push(`GetLoads entry with dp_rank ${load.dp_rank} skipped`);
      continue;
    }
    const scraped: ScrapedLoad = { running: Math.max(0, load.num_running_reqs), waiting: Math.max(0, load.num_waiting_reqs) };
    if (Number.isFinite(load.token_usage) && load.token_usage >= 0 && load.token_usage <= 1) scraped.kvUsagePerc = load.token_usage;
    // 0 is "not reported"; anything else is judged, so a negative or huge total is refused rather than dropped unseen.
    const total =
      load.max_total_num_tokens === 0 ? undefined : accept('kvTotalBlocks', 'max_total_num_tokens', Math.floor(load.max_total_num_tokens / blockSize));
    if (total !== undefined) {
      scraped.kvTotalBlocks = total;
      scraped.kvUsedBlocks = Math.min(total, Math.ceil(Math.max(0, load.num_used_tokens) / blockSize));
    } else if (scraped.kvUsagePerc !== undefined && kvTotalBlocks !== undefined) {
      scraped.kvUsedBlocks = Math.round(scraped.kvUsagePerc * kvTotalBlocks);
    }
    ranks.set(load.dp_rank, scraped);
  }
  return { ranks, problems };
}
