/**
 * Token accounting from raw Generate messages, without the engines' .proto files.
 *
 *   decodeGenerateRequest(bytes, wire) -> { promptTokens, maxTokens?, promptEstimated, dataParallelRank? } | undefined
 *   decodeGenerateResponse(bytes, wire) -> { kind, tokens, completionTokens? } | undefined
 *
 * Only the fields we count are read; everything else is skipped by wire type. Malformed bytes
 * give `undefined`, never a throw (protobufjs's Reader throws RangeError/Error on truncation,
 * which is caught here).
 *
 * Which layout an engine speaks is configuration (--generate-wire), never guessed from the
 * bytes: the layouts reuse the same numbers for different things (field 1 of a response is the
 * chunk today and was the request_id before), so a guess would misread every message of one of
 * them. Field numbers (docs/wire-facts.md, "Generate layouts"):
 *
 *              GenerateRequest                                   GenerateResponse
 *   vllm        tokenized 2 {input_ids 2}, text 3,                chunk 1, complete 2
 *               sampling_params 4 {max_tokens 8},                 (errors are gRPC statuses)
 *               data_parallel_rank 9 (optional int32)
 *   vllm-legacy the same request                                  request_id 1, chunk 2, complete 3, error 4
 *   sglang      tokenized 2 {input_ids 2}, (3 is mm_inputs),      request_id 1, chunk 2, complete 3
 *               sampling_params 4 {max_new_tokens 8},             (4 reserved, was the error)
 *               data_parallel_rank 16 (int32; <= 0 means unset)
 *
 * In every layout a chunk has token_ids 1 and completion_tokens 3, a complete output_ids 1 and
 * completion_tokens 4. A text prompt (vLLM only) is counted with a swappable estimator.
 *
 * Output counting: a chunk's token_ids are new tokens (a delta). What the counters mean differs:
 * - SGLang and the legacy layout: completion_tokens is the running total (SGLang's meta_info),
 *   reported as `completionTokens`, and wins.
 * - vLLM today (SMG's servicer streams with RequestOutputKind.DELTA): completion_tokens is the
 *   chunk's own count, and a streamed call's final `complete` repeats the last chunk's ids; only
 *   a non-streamed call's `complete` holds the whole output. So `completionTokens` is never
 *   reported, and a complete's `tokens` is the whole output only when no chunk came before.
 * Callers therefore count `completionTokens` when present, else chunk `tokens` as deltas and a
 * complete's `tokens` as a total that never lowers what the chunks added up to.
 */
import protobuf from 'protobufjs/minimal.js';

export const GENERATE_WIRES = ['vllm', 'vllm-legacy', 'sglang'] as const;
export type GenerateWire = (typeof GENERATE_WIRES)[number];

/** The gRPC service each layout belongs to; its methods are `/${service}/Generate`, `/GetLoads`, ... */
export const ENGINE_SERVICE: Readonly<Record<GenerateWire, string>> = {
  vllm: 'vllm.grpc.engine.VllmEngine',
  'vllm-legacy': 'vllm.grpc.engine.VllmEngine',
  sglang: 'sglang.grpc.scheduler.SglangScheduler',
};

export function enginePath(wire: GenerateWire, method: 'Generate' | 'GetLoads' | 'GetModelInfo'): string {
  return `/${ENGINE_SERVICE[wire]}/${method}`;
}

interface Layout {
  /** Request: the text prompt's field, when the layout has one. */
  readonly textField: number | undefined;
  /** Request: the dp rank's field; `explicitPresence` when a set 0 is on the wire (proto3 optional). */
  readonly rankField: number;
  readonly rankExplicitPresence: boolean;
  /** Response: oneof branches. */
  readonly chunkField: number;
  readonly completeField: number;
  readonly errorField: number | undefined;
  /** Whether completion_tokens is the running total (else the message's own count). */
  readonly cumulativeCompletionTokens: boolean;
}

const LAYOUTS: Readonly<Record<GenerateWire, Layout>> = {
  vllm: { textField: 3, rankField: 9, rankExplicitPresence: true, chunkField: 1, completeField: 2, errorField: undefined, cumulativeCompletionTokens: false },
  'vllm-legacy': { textField: 3, rankField: 9, rankExplicitPresence: true, chunkField: 2, completeField: 3, errorField: 4, cumulativeCompletionTokens: true },
  sglang: {
    textField: undefined,
    rankField: 16,
    rankExplicitPresence: false,
    chunkField: 2,
    completeField: 3,
    errorField: undefined,
    cumulativeCompletionTokens: true,
  },
};

export interface GenerateRequestInfo {
  promptTokens: number;
  maxTokens?: number;
  /** True when the prompt was text and promptTokens is an estimate. */
  promptEstimated: boolean;
  /** The rank the request pins, when it pins one (never negative). */
  dataParallelRank?: number;
}

export type GenerateResponseKind = 'chunk' | 'complete' | 'error' | 'unknown';

export interface GenerateResponseInfo {
  kind: GenerateResponseKind;
  /** chunk: new token ids in this message; complete: all output ids; otherwise 0. */
  tokens: number;
  /** The running total of completion tokens, when the layout reports one and it is non-zero. */
  completionTokens?: number;
}

/**
 * Token estimate for a text prompt: the number of whitespace-separated words. Deliberately
 * crude and swappable (pass another estimator to the decoder); to be aligned with the
 * simulated engine's tokenizer.
 */
export function estimateTextTokens(text: string): number {
  const trimmed = text.trim();
  return trimmed === '' ? 0 : trimmed.split(/\s+/).length;
}

type Reader = protobuf.Reader;
const WIRE_VARINT = 0;
const WIRE_LEN = 2;

export function decodeGenerateRequest(
  bytes: Uint8Array,
  wire: GenerateWire,
  estimate: (text: string) => number = estimateTextTokens,
): GenerateRequestInfo | undefined {
  const layout = LAYOUTS[wire];
  try {
    const r = protobuf.Reader.create(bytes);
    let promptTokens: number | undefined;
    let promptEstimated = false;
    let maxTokens: number | undefined;
    let rank: number | undefined;
    while (r.pos < r.len) {
      const tag = readTag(r);
      const field = tag >>> 3;
      const type = tag & 7;
      if (field === 2 && type === WIRE_LEN) {
        promptTokens = countRepeatedVarints(subReader(r), 2);
        promptEstimated = false;
      } else if (field === layout.textField && type === WIRE_LEN) {
        promptTokens = estimate(r.string());
        promptEstimated = true;
      } else if (field === 4 && type === WIRE_LEN) {
        maxTokens = readVarintField(subReader(r), 8) ?? maxTokens;
      } else if (field === layout.rankField && type === WIRE_VARINT) {
        const value = r.int32();
        // proto3 without presence (SGLang) cannot tell "rank 0" from "unset"; both mean "engine picks".
        rank = value > 0 || (value === 0 && layout.rankExplicitPresence) ? value : undefined;
      } else {
        skip(r, type);
      }
    }
    if (promptTokens === undefined) return undefined;
    const info: GenerateRequestInfo = { promptTokens, promptEstimated };
    if (maxTokens !== undefined) info.maxTokens = maxTokens;
    if (rank !== undefined) info.dataParallelRank = rank;
    return info;
  } catch {
    return undefined;
  }
}

export function decodeGenerateResponse(bytes: Uint8Array, wire: GenerateWire): GenerateResponseInfo | undefined {
  const layout = LAYOUTS[wire];
  try {
    const r = protobuf.Reader.create(bytes);
    let info: GenerateResponseInfo = { kind: 'unknown', tokens: 0 };
    while (r.pos < r.len) {
      const tag = readTag(r);
      const field = tag >>> 3;
      const type = tag & 7;
      if ((field === layout.chunkField || field === layout.completeField) && type === WIRE_LEN) {
        // Both carry the ids in field 1; completion_tokens is 3 in a chunk, 4 in a complete.
        const isChunk = field === layout.chunkField;
        const sub = subReader(r);
        const completionField = isChunk ? 3 : 4;
        let tokens = 0;
        let completion: number | undefined;
        while (sub.pos < sub.len) {
          const t = readTag(sub);
          if (t >>> 3 === 1) tokens += readRepeatedVarint(sub, t & 7);
          else if (t >>> 3 === completionField && (t & 7) === WIRE_VARINT) completion = sub.uint32();
          else skip(sub, t & 7);
        }
        info = { kind: isChunk ? 'chunk' : 'complete', tokens };
        if (completion && layout.cumulativeCompletionTokens) info.completionTokens = completion;
      } else if (field === layout.errorField && type === WIRE_LEN) {
        r.skip(r.uint32());
        info = { kind: 'error', tokens: 0 };
      } else {
        skip(r, type);
      }
    }
    return info;
  } catch {
    return undefined;
  }
}

/** Reads a length-delimited field as a reader over exactly its bytes (no copy for Buffers). */
function subReader(r: Reader): Reader {
  return protobuf.Reader.create(r.bytes());
}

/** Count of entries of repeated varint field `field` inside a message, packed or not. */
function countRepeatedVarints(r: Reader, field: number): number {
  let n = 0;
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag >>> 3 === field) n += readRepeatedVarint(r, tag & 7);
    else skip(r, tag & 7);
  }
  return n;
}

/** One occurrence of a repeated varint field: packed (a run of varints) or a single value. */
function readRepeatedVarint(r: Reader, wire: number): number {
  if (wire === WIRE_VARINT) {
    r.skipType(WIRE_VARINT);
    return 1;
  }
  if (wire !== WIRE_LEN) throw new Error(`wire type ${wire} for a repeated varint`);
  const len = r.uint32();
  const end = r.pos + len;
  if (end > r.len) throw new RangeError('packed field past end of message');
  // A varint ends at each byte with the high bit clear, so counting those counts the values.
  let n = 0;
  for (let i = r.pos; i < end; i++) if (r.buf[i]! < 0x80) n++;
  if (len > 0 && r.buf[end - 1]! >= 0x80) throw new Error('truncated varint in packed field');
  r.pos = end;
  return n;
}

/** Last value of varint field `field` in a message, if any. */
function readVarintField(r: Reader, field: number): number | undefined {
  let value: number | undefined;
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag >>> 3 === field && (tag & 7) === WIRE_VARINT) value = r.uint32();
    else skip(r, tag & 7);
  }
  return value;
}

function skip(r: Reader, wire: number): void {
  // skipType throws on wire types 6/7 (invalid) and on truncation; callers catch.
  r.skipType(wire);
}

/** Reads a tag; field number 0 is never valid and marks garbage early. */
function readTag(r: Reader): number {
  const tag = r.uint32();
  if (tag >>> 3 === 0) throw new Error('field number 0');
  return tag;
}
