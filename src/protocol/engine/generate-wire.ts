/**
 * Token accounting from raw Generate messages, without the engines' .proto files.
 *
 *   decodeGenerateRequest(bytes, wire) -> { promptTokens, maxTokens?, promptEstimated, dataParallelRank? } | undefined
 *   decodeGenerateResponse(bytes, wire, { cumulativeOutputIds }) -> { kind, tokens, cumulative, completionTokens? } | undefined
 *
 * Only the fields we count are read; everything else is skipped by wire type. Malformed bytes
 * give `undefined`, never a throw (protobufjs's Reader throws RangeError/Error on truncation,
 * which is caught here).
 *
 * Which protocol an engine speaks is configuration (--generate-wire), never guessed from the
 * bytes: the layouts reuse the same numbers for different things (field 1 of a response is the
 * chunk in one, the request_id or the output ids in others), so a guess would misread every
 * message of one of them. One row per protocol (docs/wire-facts.md, "Generate layouts" and
 * "Engine protocols"):
 *
 *   wire           accounted RPCs                      request                                    response
 *   vllm           VllmEngine/Generate                 tokenized 2 {input_ids 2}, text 3,          oneof chunk 1 | complete 2
 *                  (SMG, vllm.grpc.engine)             sampling_params 4 {max_tokens 8},           (errors are gRPC statuses)
 *                                                      data_parallel_rank 9 (optional int32)
 *   vllm-legacy    the same                            the same                                    request_id 1, chunk 2, complete 3, error 4
 *   sglang         SglangScheduler/Generate            tokenized 2 {input_ids 2},                  request_id 1, chunk 2, complete 3
 *                  (SMG, sglang.grpc.scheduler)        sampling_params 4 {max_new_tokens 8},
 *                                                      data_parallel_rank 16 (int32; <= 0 = unset)
 *   vllm-native    vllm.Inference/Generate and         token_ids 4 {ids 1}, text 3,                prompt_info 1, outputs 2 {num_tokens 3,
 *                  /GenerateStream (vLLM's own)        stopping 8 {max_new_tokens 1; 0 = unset};   token_ids 4, finish_info 8
 *                                                      rank only as x-data-parallel-rank metadata  {num_output_tokens 1}}
 *   sglang-native  sglang.runtime.v1.SglangService/    input_ids 1, sampling_params 2              output_ids 1, meta_info 2, finished 3
 *                  Generate (SGLang's own)             {max_new_tokens 8}, routed_dp_rank 10
 *                                                      (optional int32)
 *
 * Output counting, per layout (each message reports `tokens`, whether they are the call's output
 * so far (`cumulative`) or new ones, and the engine's running total when it gives one):
 * - vllm, sglang, vllm-legacy: a chunk's token_ids are new. SGLang and the legacy layout report
 *   completion_tokens as the running total (SGLang's meta_info), which wins. vLLM today (SMG's
 *   servicer streams with RequestOutputKind.DELTA) counts per chunk, and a streamed call's final
 *   `complete` repeats the last chunk's ids, so a complete's ids are read as a total that never
 *   lowers what the chunks added up to.
 * - vllm-native: every message's num_tokens (or its token_ids, sent only on request) are new;
 *   finish_info.num_output_tokens on the last message is the running total.
 * - sglang-native: output_ids are new only when the engine runs with
 *   --incremental-streaming-output; by default each message holds all ids so far. The engine
 *   says which in GetServerInfo, so the caller passes `cumulativeOutputIds`.
 */
import protobuf from 'protobufjs/minimal.js';

export const GENERATE_WIRES = ['vllm', 'vllm-legacy', 'sglang', 'vllm-native', 'sglang-native'] as const;
export type GenerateWire = (typeof GENERATE_WIRES)[number];

/** The engine's RPCs the sidecar reads, as gRPC paths; `undefined` where the protocol has none. */
export interface EnginePaths {
  /** Calls whose tokens are accounted. */
  readonly generate: readonly string[];
  readonly modelInfo: string;
  /** The capacity answer (vllm-native Control/GetServerInfo, sglang-native GetServerInfo). */
  readonly serverInfo: string | undefined;
  /** Per-rank loads: GetLoads (protobuf), or sglang-native's GetLoad (JSON). */
  readonly loads: string | undefined;
}

function smgPaths(service: string): EnginePaths {
  return {
    generate: [`/${service}/Generate`],
    modelInfo: `/${service}/GetModelInfo`,
    serverInfo: undefined,
    loads: `/${service}/GetLoads`,
  };
}

const SGLANG_NATIVE_SERVICE = 'sglang.runtime.v1.SglangService';

export const ENGINE_PATHS: Readonly<Record<GenerateWire, EnginePaths>> = {
  vllm: smgPaths('vllm.grpc.engine.VllmEngine'),
  'vllm-legacy': smgPaths('vllm.grpc.engine.VllmEngine'),
  sglang: smgPaths('sglang.grpc.scheduler.SglangScheduler'),
  'vllm-native': {
    generate: ['/vllm.Inference/Generate', '/vllm.Inference/GenerateStream'],
    modelInfo: '/vllm.Control/GetModelInfo',
    serverInfo: '/vllm.Control/GetServerInfo',
    loads: undefined,
  },
  'sglang-native': {
    generate: [`/${SGLANG_NATIVE_SERVICE}/Generate`],
    modelInfo: `/${SGLANG_NATIVE_SERVICE}/GetModelInfo`,
    serverInfo: `/${SGLANG_NATIVE_SERVICE}/GetServerInfo`,
    loads: `/${SGLANG_NATIVE_SERVICE}/GetLoad`,
  },
};

/** A field holding a message, and the field inside it we read. */
interface Nested {
  readonly field: number;
  readonly inner: number;
}

interface RequestLayout {
  /** The prompt's ids: a message with a repeated field (`inner`), or the repeated field itself. */
  readonly prompt: Nested | { readonly field: number; readonly inner: undefined };
  /** The text prompt's field, when the layout has one. */
  readonly textField: number | undefined;
  readonly maxTokens: Nested;
  /** The dp rank's field (none: metadata only); `explicitPresence` when a set 0 is on the wire (proto3 optional). */
  readonly rankField: number | undefined;
  readonly rankExplicitPresence: boolean;
}

type ResponseLayout =
  /** oneof chunk/complete (SMG's and the legacy layout): ids in 1, completion_tokens 3 (chunk) or 4 (complete). */
  | {
      readonly form: 'oneof';
      readonly chunkField: number;
      readonly completeField: number;
      readonly errorField: number | undefined;
      readonly cumulativeCompletionTokens: boolean;
    }
  | { readonly form: 'vllm-native' }
  | { readonly form: 'sglang-native' };

const SMG_VLLM_REQUEST: RequestLayout = {
  prompt: { field: 2, inner: 2 },
  textField: 3,
  maxTokens: { field: 4, inner: 8 },
  rankField: 9,
  rankExplicitPresence: true,
};

const LAYOUTS: Readonly<Record<GenerateWire, { readonly request: RequestLayout; readonly response: ResponseLayout }>> = {
  vllm: {
    request: SMG_VLLM_REQUEST,
    response: { form: 'oneof', chunkField: 1, completeField: 2, errorField: undefined, cumulativeCompletionTokens: false },
  },
  'vllm-legacy': {
    request: SMG_VLLM_REQUEST,
    response: { form: 'oneof', chunkField: 2, completeField: 3, errorField: 4, cumulativeCompletionTokens: true },
  },
  sglang: {
    request: { prompt: { field: 2, inner: 2 }, textField: undefined, maxTokens: { field: 4, inner: 8 }, rankField: 16, rankExplicitPresence: false },
    response: { form: 'oneof', chunkField: 2, completeField: 3, errorField: undefined, cumulativeCompletionTokens: true },
  },
  'vllm-native': {
    request: { prompt: { field: 4, inner: 1 }, textField: 3, maxTokens: { field: 8, inner: 1 }, rankField: undefined, rankExplicitPresence: false },
    response: { form: 'vllm-native' },
  },
  'sglang-native': {
    request: { prompt: { field: 1, inner: undefined }, textField: undefined, maxTokens: { field: 2, inner: 8 }, rankField: 10, rankExplicitPresence: true },
    response: { form: 'sglang-native' },
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
  /** Output tokens this message reports: new ones, or with `cumulative` the call's output so far. */
  tokens: number;
  cumulative: boolean;
  /** The engine's running total of output tokens, when the layout reports one and it is non-zero. */
  completionTokens?: number;
}

export interface GenerateResponseOptions {
  /** sglang-native: output_ids hold all ids so far (SGLang without --incremental-streaming-output). */
  readonly cumulativeOutputIds?: boolean;
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
  const layout = LAYOUTS[wire].request;
  const { prompt } = layout;
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
      if (field === prompt.field && prompt.inner === undefined) {
        // A repeated field of the request itself: packed runs or single values add up.
        promptTokens = (promptTokens ?? 0) + readRepeatedVarint(r, type);
      } else if (field === prompt.field && type === WIRE_LEN) {
        promptTokens = countRepeatedVarints(subReader(r), prompt.inner!);
        promptEstimated = false;
      } else if (field === layout.textField && type === WIRE_LEN) {
        promptTokens = estimate(r.string());
        promptEstimated = true;
      } else if (field === layout.maxTokens.field && type === WIRE_LEN) {
        // 0 is "unset" in every layout (proto3 without presence, or a limit no engine accepts).
        maxTokens = readVarintField(subReader(r), layout.maxTokens.inner) || maxTokens;
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

export function decodeGenerateResponse(bytes: Uint8Array, wire: GenerateWire, options: GenerateResponseOptions = {}): GenerateResponseInfo | undefined {
  const layout = LAYOUTS[wire].response;
  try {
    const r = protobuf.Reader.create(bytes);
    switch (layout.form) {
      case 'oneof':
        return decodeOneofResponse(r, layout);
      case 'vllm-native':
        return decodeVllmNativeResponse(r);
      case 'sglang-native':
        return decodeSglangNativeResponse(r, options.cumulativeOutputIds ?? false);
    }
  } catch {
    return undefined;
  }
}

function decodeOneofResponse(r: Reader, layout: Extract<ResponseLayout, { form: 'oneof' }>): GenerateResponseInfo {
  let info: GenerateResponseInfo = { kind: 'unknown', tokens: 0, cumulative: false };
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
      info = { kind: isChunk ? 'chunk' : 'complete', tokens, cumulative: !isChunk };
      if (completion && layout.cumulativeCompletionTokens) info.completionTokens = completion;
    } else if (field === layout.errorField && type === WIRE_LEN) {
      r.skip(r.uint32());
      info = { kind: 'error', tokens: 0, cumulative: false };
    } else {
      skip(r, type);
    }
  }
  return info;
}

/** prompt_info 1 (the first message, no output), outputs 2 {num_tokens 3, token_ids 4, finish_info 8 {num_output_tokens 1}}. */
function decodeVllmNativeResponse(r: Reader): GenerateResponseInfo {
  let info: GenerateResponseInfo = { kind: 'unknown', tokens: 0, cumulative: false };
  while (r.pos < r.len) {
    const tag = readTag(r);
    if (tag >>> 3 !== 2 || (tag & 7) !== WIRE_LEN) {
      skip(r, tag & 7);
      continue;
    }
    const sub = subReader(r);
    let numTokens: number | undefined;
    let ids = 0;
    let finished = false;
    let total: number | undefined;
    while (sub.pos < sub.len) {
      const t = readTag(sub);
      const field = t >>> 3;
      if (field === 3 && (t & 7) === WIRE_VARINT) numTokens = sub.uint32();
      else if (field === 4) ids += readRepeatedVarint(sub, t & 7);
      else if (field === 8 && (t & 7) === WIRE_LEN) {
        finished = true;
        total = readVarintField(subReader(sub), 1);
      } else skip(sub, t & 7);
    }
    // token_ids come only when the client asked for them; num_tokens always counts them.
    info = { kind: finished ? 'complete' : 'chunk', tokens: numTokens ?? ids, cumulative: false };
    if (total) info.completionTokens = total;
  }
  return info;
}

/** output_ids 1, meta_info 2 (JSON text, not read), finished 3. */
function decodeSglangNativeResponse(r: Reader, cumulativeOutputIds: boolean): GenerateResponseInfo {
  let tokens = 0;
  let finished = false;
  while (r.pos < r.len) {
    const tag = readTag(r);
    const field = tag >>> 3;
    if (field === 1) tokens += readRepeatedVarint(r, tag & 7);
    else if (field === 3 && (tag & 7) === WIRE_VARINT) finished = r.bool();
    else skip(r, tag & 7);
  }
  return { kind: finished ? 'complete' : 'chunk', tokens, cumulative: cumulativeOutputIds };
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
