/**
 * Protocol Buffers bytes written by hand from field numbers, for tests that check our decoders
 * against the upstream wire facts rather than against this project's own .proto files, plus
 * the engine messages several tests share (docs/wire-facts.md has each number's source).
 */
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

export function varint(value: number | bigint): number[] {
  let v = BigInt.asUintN(64, BigInt(value)); // a negative int32 is sign-extended to 10 bytes on the wire
  const out: number[] = [];
  do {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? low | 0x80 : low);
  } while (v > 0n);
  return out;
}
const tag = (field: number, wire: number): number[] => varint((field << 3) | wire);
/** A varint field (int32, uint32, bool, enum). */
export const num = (field: number, value: number | bigint): number[] => [...tag(field, VARINT), ...varint(value)];
/** A length-delimited field around an already encoded body (a sub-message or packed values). */
export const bytes = (field: number, body: number[]): number[] => [...tag(field, LEN), ...varint(body.length), ...body];
export const str = (field: number, text: string): number[] => bytes(field, [...Buffer.from(text, 'utf8')]);
export const packed = (field: number, values: number[]): number[] =>
  bytes(
    field,
    values.flatMap((v) => varint(v)),
  );
export const unpacked = (field: number, values: number[]): number[] => values.flatMap((v) => num(field, v));
export const float = (field: number, value: number): number[] => {
  const b = Buffer.alloc(4);
  b.writeFloatLE(value);
  return [...tag(field, I32), ...b];
};
export const double = (field: number, value: number): number[] => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(value);
  return [...tag(field, I64), ...b];
};
export const msg = (...parts: number[][]): Buffer => Buffer.from(parts.flat());

/** `count` token ids, spread so that some need several varint bytes. */
export const tokenIds = (count: number, start = 1): number[] => Array.from({ length: count }, (_, i) => start + i * 1000);

/**
 * A GenerateRequest with `promptTokens` token ids and max_tokens 16. SMG's vLLM (current and
 * legacy): request_id 1, tokenized 2 {input_ids 2}, sampling_params 4 {max_tokens 8}, stream 5,
 * data_parallel_rank 9. SMG's SGLang: the same up to 4 (max_new_tokens 8), stream 17, rank 16.
 * vLLM's own (vllm.Inference): request_id 1, token_ids 4 {ids 1}, stopping 8 {max_new_tokens 1},
 * response 9 {output_token_ids 5}. SGLang's own (runtime.v1): input_ids 1, sampling_params 2
 * {max_new_tokens 8}, stream 3, rid 7.
 */
export function generateRequestBytes(wire: 'vllm' | 'vllm-legacy' | 'sglang' | 'vllm-native' | 'sglang-native', promptTokens: number): Buffer {
  if (wire === 'vllm-native') return msg(str(1, 'req'), bytes(4, packed(1, tokenIds(promptTokens))), bytes(8, num(1, 16)), bytes(9, num(5, 1)));
  if (wire === 'sglang-native') return msg(packed(1, tokenIds(promptTokens)), bytes(2, num(8, 16)), num(3, 1), str(7, 'req'));
  const common = [str(1, 'req'), bytes(2, packed(2, tokenIds(promptTokens))), bytes(4, num(8, 16))];
  return wire === 'sglang' ? msg(...common, num(17, 1)) : msg(...common, num(5, 1));
}

/** SMG sglang_scheduler.proto SchedulerLoad (GetLoadsResponse.loads = 4), with fields vLLM lacks (12, 17). */
function sglangLoad(rank: number, usedTokens: number, totalTokens: number, running: number, waiting: number): number[] {
  return bytes(4, [
    ...(rank ? num(1, rank) : []),
    ...num(2, running),
    ...num(3, waiting),
    ...num(4, running + waiting),
    ...num(5, usedTokens),
    ...num(6, totalTokens),
    ...double(7, usedTokens / totalTokens),
    ...double(8, 123.5),
    ...num(11, 256),
    ...bytes(12, [...double(1, 14.2), ...double(2, 60.1)]), // MemoryMetrics
    ...num(17, 99), // num_waiting_uncached_tokens
  ]);
}

/** An SGLang GetLoadsResponse: 2 ranks (4096 and 1000 of 65536 tokens used), plus the aggregate (5). */
export const GET_LOADS_SGLANG = msg(
  str(1, '2026-12-02T10:00:00Z'),
  str(2, '0.5.4'),
  num(3, 2),
  sglangLoad(0, 4096, 65536, 3, 1),
  sglangLoad(1, 1000, 65536, 1, 0),
  bytes(5, [...num(1, 4), ...num(2, 1)]),
);

/** What SMG's vLLM servicer sends: one rank, request counts and token_usage (0.25) only. */
export const GET_LOADS_VLLM = msg(
  str(1, '2026-12-02T10:00:00Z'),
  str(2, '0.11.0'),
  num(3, 1),
  bytes(4, [...num(2, 5), ...num(3, 2), ...num(4, 7), ...double(7, 0.25)]),
);
