/**
 * Token accounting from raw Generate messages, without the engines' .proto files.
 *
 *   generateFlavorForPath(':path') -> 'vllm' | 'sglang' | undefined
 *   decodeGenerateRequest(bytes, flavor) -> { promptTokens, maxTokens?, promptEstimated } | undefined
 *   decodeGenerateResponse(bytes) -> { kind, tokens, completionTokens? } | undefined
 *   new GenerateWireDecoder(flavor)  // the same, plus counters of what could not be decoded
 *
 * Only the fields we count are read; everything else is skipped by wire type. Malformed bytes
 * give `undefined`, never a throw (protobufjs's Reader throws RangeError/Error on truncation,
 * which is caught here).
 *
 * Field numbers (vLLM `vllm.grpc.engine`, docs/wire-facts.md; SGLang `sglang.grpc.scheduler`,
 * sglang_scheduler.proto): GenerateRequest 2 tokenized{2 input_ids repeated uint32},
 * 4 sampling_params{8 max_tokens (vLLM) | max_new_tokens (SGLang)}. Field 3 is `text` in vLLM
 * but `mm_inputs` in SGLang, so a text prompt is only recognised for vLLM.
 * GenerateResponse 2 chunk{1 token_ids, 3 completion_tokens}, 3 complete{1 output_ids,
 * 4 completion_tokens}, 4 error. Same numbers in both engines.
 *
 * Output counting: a chunk's token_ids are new tokens (a delta). A complete's output_ids carry
 * the whole output (vLLM sends all ids there), so its count is cumulative. When a message has
 * `completion_tokens` (cumulative by definition), that number wins: callers should treat
 * `completionTokens` as the total so far and `tokens` as a delta only for chunks without it.
 */
import protobuf from 'protobufjs/minimal.js';

export type GenerateFlavor = 'vllm' | 'sglang';

export const GENERATE_PATHS: Readonly<Record<string, GenerateFlavor>> = {
  '/vllm.grpc.engine.VllmEngine/Generate': 'vllm',
  '/sglang.grpc.scheduler.SglangScheduler/Generate': 'sglang',
};

export function generateFlavorForPath(path: string): GenerateFlavor | undefined {
  return Object.hasOwn(GENERATE_PATHS, path) ? GENERATE_PATHS[path] : undefined;
}

export interface GenerateRequestInfo {
  promptTokens: number;
  maxTokens?: number;
  /** True when the prompt was text and promptTokens is an estimate. */
  promptEstimated: boolean;
}

export type GenerateResponseKind = 'chunk' | 'complete' | 'error' | 'unknown';

export interface GenerateResponseInfo {
  kind: GenerateResponseKind;
  /** chunk: new token ids in this message; complete: all output ids; otherwise 0. */
  tokens: number;
  /** Cumulative completion tokens reported by the engine, when present and non-zero. */
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
  flavor: GenerateFlavor,
  estimate: (text: string) => number = estimateTextTokens,
): GenerateRequestInfo | undefined {
  try {
    const r = protobuf.Reader.create(bytes);
    let promptTokens: number | undefined;
    let promptEstimated = false;
    let maxTokens: number | undefined;
    while (r.pos < r.len) {
      const tag = readTag(r);
      const field = tag >>> 3;
      const wire = tag & 7;
      if (field === 2 && wire === WIRE_LEN) {
        promptTokens = countRepeatedVarints(subReader(r), 2);
        promptEstimated = false;
      } else if (field === 3 && wire === WIRE_LEN && flavor === 'vllm') {
        promptTokens = estimate(r.string());
        promptEstimated = true;
      } else if (field === 4 && wire === WIRE_LEN) {
        maxTokens = readVarintField(subReader(r), 8) ?? maxTokens;
      } else {
        skip(r, wire);
      }
    }
    if (promptTokens === undefined) return undefined;
    return maxTokens === undefined ? { promptTokens, promptEstimated } : { promptTokens, maxTokens, promptEstimated };
  } catch {
    return undefined;
  }
}

export function decodeGenerateResponse(bytes: Uint8Array): GenerateResponseInfo | undefined {
  try {
    const r = protobuf.Reader.create(bytes);
    let info: GenerateResponseInfo = { kind: 'unknown', tokens: 0 };
    while (r.pos < r.len) {
      const tag = readTag(r);
      const field = tag >>> 3;
      const wire = tag & 7;
      if ((field === 2 || field === 3) && wire === WIRE_LEN) {
        // Both carry the ids in field 1; completion_tokens is 3 in a chunk, 4 in a complete.
        const sub = subReader(r);
        const completionField = field === 2 ? 3 : 4;
        let tokens = 0;
        let completion: number | undefined;
        while (sub.pos < sub.len) {
          const t = readTag(sub);
          if (t >>> 3 === 1) tokens += readRepeatedVarint(sub, t & 7);
          else if (t >>> 3 === completionField && (t & 7) === WIRE_VARINT) completion = sub.uint32();
          else skip(sub, t & 7);
        }
        info = { kind: field === 2 ? 'chunk' : 'complete', tokens };
        if (completion) info.completionTokens = completion;
      } else if (field === 4 && wire === WIRE_LEN) {
        r.skip(r.uint32());
        info = { kind: 'error', tokens: 0 };
      } else {
        skip(r, wire);
      }
    }
    return info;
  } catch {
    return undefined;
  }
}

/** Per-call helper that counts what it could not decode; one instance per proxy (or per call). */
export class GenerateWireDecoder {
  readonly stats = { requests: 0, responses: 0, malformed: 0 };

  constructor(
    readonly flavor: GenerateFlavor,
    private readonly estimate: (text: string) => number = estimateTextTokens,
  ) {}

  request(bytes: Uint8Array): GenerateRequestInfo | undefined {
    const info = decodeGenerateRequest(bytes, this.flavor, this.estimate);
    if (info) this.stats.requests++;
    else this.stats.malformed++;
    return info;
  }

  response(bytes: Uint8Array): GenerateResponseInfo | undefined {
    const info = decodeGenerateResponse(bytes);
    if (info) this.stats.responses++;
    else this.stats.malformed++;
    return info;
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
