/**
 * How long one scheduler step of a real GPU takes, from first principles, so that the simulated
 * engine slows down with load as a GPU does. Pure functions, no I/O.
 *
 * Decode is memory-bound: every step reads all the weights once, and each decoding sequence reads
 * its whole KV cache (2 tensors, K and V, per layer and KV head), so
 *   decode time = (weight bytes + KV bytes of every decoding sequence) / bandwidth.
 * Prefill is compute-bound: a forward pass costs 2 FLOPs per parameter per token, so
 *   prefill time = 2 * parameters * prefill tokens / FLOPS.
 * A step that both decodes and prefills (vLLM's mixed batch under chunked prefill) costs both.
 * Bandwidth and FLOPS are the datasheet's, times the GPU count (tensor parallel: weights and KV
 * heads are split across the GPUs, which read their shares at once), times one efficiency factor
 * (what real kernels reach of the peak); a fixed overhead per step covers what scales with
 * neither (kernel launches, the scheduler's CPU work, the tensor-parallel all-reduces).
 *
 * Left out on purpose: prefill attention (each prompt token attending to the tokens before it),
 * 4 * layers * q_heads * head_dim FLOPs per token per context token, which for the models here
 * is under 5% of 2 * parameters until the context passes about 5,000 tokens (Llama-3.3-70B:
 * 4 * 80 * 8192 * 2500 average context = 6.6 GFLOP against 141 GFLOP per token); and the weight
 * reads of a step that only prefills, hidden under its compute for chunks of hundreds of tokens
 * or more. Decode attention is counted, as the KV bytes it reads.
 */

/** A transformer's shape, as far as its cost goes. */
export interface ModelShape {
  /** Total parameters (embeddings included: they are read too, and tied heads are counted once). */
  readonly parameters: number;
  readonly layers: number;
  readonly kvHeads: number;
  readonly headDim: number;
  /** Bytes per weight: 2 for bf16, 1 for fp8. */
  readonly weightBytes: number;
  /** Bytes per KV cache element: 2 for bf16, 1 for an fp8 KV cache. */
  readonly kvBytes: number;
}

/** The GPUs one engine (one dp rank) runs on, from the vendor's datasheet. */
export interface GpuShape {
  /** GPUs per engine (tensor parallel size). */
  readonly count: number;
  /** Memory per GPU, bytes. */
  readonly memoryBytes: number;
  /** Memory bandwidth per GPU, bytes/s. */
  readonly bandwidthBytesPerS: number;
  /** Dense tensor-core peak per GPU at the weights' precision, FLOP/s (no sparsity). */
  readonly peakFlops: number;
}

/** The two constants fitted to a published measurement. */
export interface Calibration {
  /** Fraction of datasheet bandwidth and FLOPS that real kernels reach, 0..1. */
  readonly efficiency: number;
  /** Time per step that scales with neither bytes nor FLOPs, ms. */
  readonly fixedOverheadMs: number;
}

export interface CostModel {
  readonly model: ModelShape;
  readonly gpu: GpuShape;
  readonly calibration: Calibration;
}

/** What one step does: the sequences it decodes (and their context) and the prompt tokens it prefills. */
export interface StepWork {
  /** Sequences that decode one token this step. */
  readonly decodeSequences: number;
  /** Sum over those sequences of their context (prompt + generated) tokens, whose KV they read. */
  readonly decodeContextTokens: number;
  /** Prompt tokens prefilled this step (chunks included). */
  readonly prefillTokens: number;
}

/** KV cache bytes per token: K and V, per layer and KV head, head_dim elements each. */
export function kvBytesPerToken(model: ModelShape): number {
  return 2 * model.layers * model.kvHeads * model.headDim * model.kvBytes;
}

export function weightBytes(model: ModelShape): number {
  return model.parameters * model.weightBytes;
}

function effectiveBandwidth({ gpu, calibration }: CostModel): number {
  return gpu.count * gpu.bandwidthBytesPerS * calibration.efficiency;
}

/** Memory-bound time of a decode step, ms: the weights once and every decoding sequence's KV. */
export function decodeMs(cost: CostModel, decodeContextTokens: number): number {
  const bytes = weightBytes(cost.model) + decodeContextTokens * kvBytesPerToken(cost.model);
  return (bytes / effectiveBandwidth(cost)) * 1000;
}

/** Compute-bound time of prefilling `tokens` prompt tokens, ms. */
export function prefillMs({ model, gpu, calibration }: CostModel, tokens: number): number {
  return ((2 * model.parameters * tokens) / (gpu.count * gpu.peakFlops * calibration.efficiency)) * 1000;
}

/**
 * Duration of one step, ms: the fixed overhead, plus decode if anything decodes, plus prefill if
 * anything prefills (a mixed batch costs both). A step with no work lasts 0.
 */
export function stepMs(cost: CostModel, work: StepWork): number {
  if (work.decodeSequences === 0 && work.prefillTokens === 0) return 0;
  const decode = work.decodeSequences > 0 ? decodeMs(cost, work.decodeContextTokens) : 0;
  const prefill = work.prefillTokens > 0 ? prefillMs(cost, work.prefillTokens) : 0;
  return cost.calibration.fixedOverheadMs + decode + prefill;
}

/**
 * The KV blocks a vLLM of this pair would allocate: (GPU memory * gpu_memory_utilization -
 * weights) / bytes per block, over all the engine's GPUs. An upper bound: vLLM also keeps the peak
 * activation memory of a profiling run out of the pool, a few percent of it.
 */
export function kvBlocks(cost: CostModel, blockSize: number, gpuMemoryUtilization: number): number {
  const budget = cost.gpu.count * cost.gpu.memoryBytes * gpuMemoryUtilization - weightBytes(cost.model);
  return Math.max(0, Math.floor(budget / (blockSize * kvBytesPerToken(cost.model))));
}
