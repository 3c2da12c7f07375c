/**
 * What an engine tells about itself, per protocol: the RPCs to ask and how each answer reads as
 * {@link EngineFacts}. Asked by the sidecar's EngineDiscovery at start and after every reconnect.
 *
 *   for (const q of factQuestions('vllm-native')) ... q.read(answerBytes) -> EngineFacts (throws on bytes that are not one)
 *
 * Per protocol (docs/wire-facts.md, "Engine protocols"; field numbers there):
 * - vllm, vllm-legacy, sglang (SMG): GetModelInfo (served_model_name 6, else model_path 1;
 *   max_context_length 3) and GetLoads (max_running_requests 11 per rank, summed; the rank count).
 *   SMG tells no KV geometry here (the simulated engine's extension fields 100-103 are not read,
 *   so it tells exactly what a real one does).
 * - vllm-native: Control/GetServerInfo (max_model_len 5, kv_block_size 6, total_kv_blocks 7 summed
 *   over the dp engines, so divided by the dp size as Dynamo does; max_running_requests 8 and
 *   max_batched_tokens 9 per engine; parallelism 4 {data_parallel_size 3, data_parallel_rank 4,
 *   the first rank}) and Control/GetModelInfo (served_model_name 2, else model_id 1).
 * - sglang-native: GetServerInfo, whose json_info 1 is JSON (page_size; max_total_num_tokens per
 *   rank, in tokens; max_running_requests for the whole server; max_prefill_tokens; dp_size, a
 *   rank count only with enable_dp_attention, as Dynamo reads it; context_length;
 *   served_model_name or model_path; incremental_streaming_output).
 * A capacity fact's value (a BoundedFact) goes to the reader's `accept`, with the engine's name for
 * the field, which says whether it stands (the sidecar holds it to its flag's range); a refused dp
 * size also leaves unknown what is derived from it (blocks per rank, max_num_seqs over all ranks).
 * 0 is proto3's "not set", so it is "not told" on every wire; so are text and absent values.
 */
import protobuf from 'protobufjs/minimal.js';
import { vllmEngineMessage, type GetLoadsResponseMessage } from './engine-proto.js';
import { ENGINE_PATHS, type GenerateWire } from './generate-wire.js';

export interface EngineFacts {
  model?: string;
  /** Tokens per KV block. */
  kvBlockSize?: number;
  /** KV blocks per dp rank. */
  kvTotalBlocks?: number;
  /** Calls the engine runs at once, summed over the worker's dp ranks (max_num_seqs x ranks). */
  maxRunningRequests?: number;
  maxNumBatchedTokens?: number;
  dataParallelSize?: number;
  /** The first dp rank this engine hosts (vLLM's multi-node data parallelism). */
  dataParallelStartRank?: number;
  maxModelLen?: number;
  /** sglang-native: output_ids are deltas (--incremental-streaming-output) rather than all ids so far. */
  incrementalOutput?: boolean;
}

/** The facts that size something in the sidecar (ranks, blocks, the auto N), each held to a range by `accept`. */
export type BoundedFact = 'kvBlockSize' | 'kvTotalBlocks' | 'maxRunningRequests' | 'maxNumBatchedTokens' | 'dataParallelSize';

/**
 * Whether the engine's `field` (its own name for it), telling `value`, may stand as `fact`: the
 * value to use, or undefined to leave the fact unknown. Asked only of values the engine sent (not 0).
 */
export type AcceptFact = (fact: BoundedFact, field: string, value: number) => number | undefined;

/** Without a range of its own: any positive safe integer. */
export const ANY_POSITIVE: AcceptFact = (_fact, _field, value) => positive(value);

export interface FactQuestion {
  readonly path: string;
  /** For logs: "the engine does not implement {rpc}". */
  readonly rpc: string;
  /** The answer's bytes as facts; throws on bytes that are not this answer. */
  read(body: Buffer, accept?: AcceptFact): EngineFacts;
}

export function factQuestions(wire: GenerateWire): readonly FactQuestion[] {
  const paths = ENGINE_PATHS[wire];
  switch (wire) {
    case 'vllm':
    case 'vllm-legacy':
    case 'sglang':
      return [
        { path: paths.modelInfo, rpc: 'GetModelInfo', read: readSmgModelInfo },
        { path: paths.loads!, rpc: 'GetLoads', read: readSmgLoads },
      ];
    case 'vllm-native':
      return [
        { path: paths.serverInfo!, rpc: 'Control/GetServerInfo', read: readVllmServerInfo },
        { path: paths.modelInfo, rpc: 'Control/GetModelInfo', read: readVllmModelInfo },
      ];
    case 'sglang-native':
      return [{ path: paths.serverInfo!, rpc: 'GetServerInfo', read: readSglangServerInfo }];
  }
}

/** A positive safe integer, else undefined (hostile or absent values are unknown, never 0). */
function positive(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** A number the engine sent (digits in JSON text too), to be judged by `accept`; 0, text and absent values are not told. */
function told(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
  return typeof n === 'number' && n !== 0 ? n : undefined;
}

/** `raw` through `accept`, when told at all. */
function judged(accept: AcceptFact, fact: BoundedFact, field: string, raw: unknown): number | undefined {
  const value = told(raw);
  return value === undefined ? undefined : accept(fact, field, value);
}

function nonNegative(value: unknown): number | undefined {
  return value === 0 || value === '0' ? 0 : positive(value);
}

function name(...candidates: unknown[]): string | undefined {
  for (const c of candidates) if (typeof c === 'string' && c.trim() !== '') return c.trim();
  return undefined;
}

/** Drops unknown facts, so merging never overwrites a known one with undefined. */
function known(facts: { [K in keyof EngineFacts]: EngineFacts[K] | undefined }): EngineFacts {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(facts)) if (v !== undefined) out[k] = v;
  return out;
}

interface SmgModelInfo {
  model_path?: string;
  served_model_name?: string;
  max_context_length?: number;
}

function readSmgModelInfo(body: Buffer): EngineFacts {
  const info = vllmEngineMessage<SmgModelInfo>('GetModelInfoResponse').deserialize(body);
  return known({
    model: name(info.served_model_name, info.model_path),
    maxModelLen: positive(info.max_context_length),
  });
}

function readSmgLoads(body: Buffer, accept: AcceptFact = ANY_POSITIVE): EngineFacts {
  const response = vllmEngineMessage<GetLoadsResponseMessage>('GetLoadsResponse').deserialize(body);
  let total = 0;
  let reporting = 0;
  let refused = false;
  for (const load of response.loads ?? []) {
    if (told(load.max_running_requests) === undefined) continue;
    const max = judged(accept, 'maxRunningRequests', 'max_running_requests', load.max_running_requests);
    if (max === undefined) refused = true;
    else total += max;
    reporting++;
  }
  // A sum missing a refused rank would understate the engine; none is better.
  const sum = reporting > 0 && !refused ? judged(accept, 'maxRunningRequests', 'max_running_requests summed over ranks', total) : undefined;
  return known({
    maxRunningRequests: sum,
    dataParallelSize: judged(accept, 'dataParallelSize', 'dp_rank_count', response.dp_rank_count),
  });
}

type Fields = Map<number, number | Uint8Array>;

/** A message's fields as `field -> value` (varints as numbers, length-delimited as their bytes); the last one wins. */
function fields(bytes: Uint8Array): Fields {
  const r = protobuf.Reader.create(bytes);
  const out: Fields = new Map();
  while (r.pos < r.len) {
    const tag = r.uint32();
    const field = tag >>> 3;
    if (field === 0) throw new Error('field number 0');
    const type = tag & 7;
    if (type === 0) out.set(field, Number(r.uint64()));
    else if (type === 2) out.set(field, r.bytes());
    else r.skipType(type);
  }
  return out;
}

function varint(map: Fields, field: number): number | undefined {
  const v = map.get(field);
  return typeof v === 'number' ? v : undefined;
}

function text(map: Fields, field: number): string | undefined {
  const v = map.get(field);
  return v === undefined || typeof v === 'number' ? undefined : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('utf8');
}

function readVllmServerInfo(body: Buffer, accept: AcceptFact = ANY_POSITIVE): EngineFacts {
  const info = fields(body);
  const parallelismBytes = info.get(4);
  const parallelism: Fields =
    parallelismBytes === undefined || typeof parallelismBytes === 'number' ? new Map<number, number | Uint8Array>() : fields(parallelismBytes);
  const dpTold = told(varint(parallelism, 3)) !== undefined;
  const dataParallelSize = judged(accept, 'dataParallelSize', 'data_parallel_size', varint(parallelism, 3));
  // Not told: one engine. Refused: the per-rank figures cannot be had from the totals.
  const dp = dpTold ? dataParallelSize : 1;
  const totalBlocks = judged(accept, 'kvTotalBlocks', 'total_kv_blocks', varint(info, 7));
  const maxRunning = judged(accept, 'maxRunningRequests', 'max_running_requests', varint(info, 8));
  return known({
    maxModelLen: positive(varint(info, 5)),
    kvBlockSize: judged(accept, 'kvBlockSize', 'kv_block_size', varint(info, 6)),
    // Summed over the dp engines the server hosts; a load event is per rank.
    kvTotalBlocks: totalBlocks === undefined || dp === undefined ? undefined : Math.max(1, Math.floor(totalBlocks / dp)),
    maxRunningRequests:
      maxRunning === undefined || dp === undefined ? undefined : accept('maxRunningRequests', 'max_running_requests x data_parallel_size', maxRunning * dp),
    maxNumBatchedTokens: judged(accept, 'maxNumBatchedTokens', 'max_batched_tokens', varint(info, 9)),
    dataParallelSize,
    dataParallelStartRank: nonNegative(varint(parallelism, 4)),
  });
}

function readVllmModelInfo(body: Buffer): EngineFacts {
  const info = fields(body);
  return known({ model: name(text(info, 2), text(info, 1)) });
}

/**
 * The JSON in field 1 (`json_info`) of SGLang's GetServerInfoResponse and GetLoadResponse,
 * parsed; throws on bytes that are not such a message or on text that is not JSON.
 */
export function sglangJsonInfo(body: Uint8Array, what: string): unknown {
  const json = text(fields(body), 1);
  if (json === undefined) throw new Error(`${what} without json_info`);
  return JSON.parse(json);
}

function readSglangServerInfo(body: Buffer, accept: AcceptFact = ANY_POSITIVE): EngineFacts {
  const parsed = sglangJsonInfo(body, 'GetServerInfoResponse');
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('json_info is not a JSON object');
  const info = parsed as Record<string, unknown>;
  const pageTold = told(info['page_size']) !== undefined;
  const kvBlockSize = judged(accept, 'kvBlockSize', 'page_size', info['page_size']);
  // Not told: a page is a token. Refused: blocks cannot be had from tokens.
  const pageSize = pageTold ? kvBlockSize : 1;
  // Tokens, held to the range of a block count (fewer blocks than tokens, so the blocks are in range too).
  const maxTotalTokens = judged(accept, 'kvTotalBlocks', 'max_total_num_tokens', info['max_total_num_tokens']);
  const dpAttention = info['enable_dp_attention'] === true;
  const incremental = info['incremental_streaming_output'];
  return known({
    model: name(info['served_model_name'], info['model_path']),
    kvBlockSize,
    kvTotalBlocks: maxTotalTokens === undefined || pageSize === undefined ? undefined : Math.ceil(maxTotalTokens / pageSize),
    maxRunningRequests: judged(accept, 'maxRunningRequests', 'max_running_requests', info['max_running_requests']),
    maxNumBatchedTokens: judged(accept, 'maxNumBatchedTokens', 'max_prefill_tokens', info['max_prefill_tokens']) ?? maxTotalTokens,
    // Without dp attention SGLang's ranks are not addressable one by one (Dynamo reads it the same way).
    dataParallelSize: dpAttention ? judged(accept, 'dataParallelSize', 'dp_size', info['dp_size']) : told(info['dp_size']) === undefined ? undefined : 1,
    maxModelLen: positive(info['context_length']),
    incrementalOutput: typeof incremental === 'boolean' ? incremental : undefined,
  });
}
