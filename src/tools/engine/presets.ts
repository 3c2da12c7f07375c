/**
 * Presets of the simulated engine: real model x GPU pairs, each with its cost model (shape from
 * the model's config.json, GPU figures from the vendor's datasheet, efficiency and overhead fitted
 * to a published measurement; sources and the calibration table are in docs/simulated-engine.md)
 * and the scheduler limits a vLLM of that pair would start with.
 */
import { kvBlocks, type CostModel } from './cost-model.js';

export interface EnginePreset {
  readonly cost: CostModel;
  /** vLLM's max_num_seqs for this GPU (the OpenAI server's default, by device memory). */
  readonly maxNumSeqs: number;
  /** vLLM's max_num_batched_tokens for this GPU (likewise). */
  readonly maxNumBatchedTokens: number;
}

/** vLLM's default share of GPU memory for weights + KV cache (--gpu-memory-utilization). */
const GPU_MEMORY_UTILIZATION = 0.9;

const MiB = 1024 ** 2;

/*
 * GPU memory is what CUDA reports (nvidia-smi's total, what vLLM's gpu_memory_utilization is a
 * share of), not the datasheet's round figure; bandwidth and FLOPS are the datasheet's.
 */

/**
 * NVIDIA H100 SXM5 80GB (datasheet): HBM3 at 3.35 TB/s; 1,979 TFLOPS FP8 dense (the datasheet's
 * 3,958 is with sparsity). CUDA reports 81,559 MiB.
 */
const H100_SXM = { memoryBytes: 81_559 * MiB, bandwidthBytesPerS: 3.35e12, fp8Flops: 1979e12 };

/**
 * NVIDIA L4 (datasheet): 24 GB GDDR6 at 300 GB/s; 121 TFLOPS FP16/BF16 dense (the datasheet's
 * 242 is with sparsity). CUDA reports 23,034 MiB.
 */
const L4 = { memoryBytes: 23_034 * MiB, bandwidthBytesPerS: 300e9, fp16Flops: 121e12 };

/**
 * vLLM's OpenAI-server defaults (vllm/engine/arg_utils.py): on a GPU with at least 70 GiB that is
 * not an A100 (H100, H200, MI300x) max_num_seqs 1024 and max_num_batched_tokens 8192, else 256
 * and 2048.
 */
const VLLM_LARGE_GPU = { maxNumSeqs: 1024, maxNumBatchedTokens: 8192 };
const VLLM_SMALL_GPU = { maxNumSeqs: 256, maxNumBatchedTokens: 2048 };

export const ENGINE_PRESETS = {
  /**
   * Llama-3.3-70B-Instruct (the Llama-3.1-70B architecture: 70.55 B parameters, 80 layers, 8 KV
   * heads of 128) in fp8 on 2 x H100 SXM, tensor parallel 2, as NVIDIA NIM 1.8.0 serves it. The
   * KV cache is taken as fp8 too: the page's figures saturate between concurrency 50 and 100
   * (5,500-token sequences), where an fp8 cache's room ends (about 90); a bf16 one would not hold
   * 50. Calibrated to NIM's published ITL at concurrency 1 and 50 (5,000 in / 500 out tokens).
   */
  'llama-3.3-70b-fp8-2xh100': {
    cost: {
      model: { parameters: 70.55e9, layers: 80, kvHeads: 8, headDim: 128, weightBytes: 1, kvBytes: 1 },
      gpu: { count: 2, memoryBytes: H100_SXM.memoryBytes, bandwidthBytesPerS: H100_SXM.bandwidthBytesPerS, peakFlops: H100_SXM.fp8Flops },
      calibration: { efficiency: 0.58, fixedOverheadMs: 0.5 },
    },
    ...VLLM_LARGE_GPU,
  },
  /**
   * Qwen2.5-7B-Instruct (7.616 B parameters, 28 layers, 4 KV heads of 128) in fp16 on one L4, as
   * vLLM 0.8.5 serves it. Calibrated to a published vLLM sweep on an L4 (TPOT at concurrency 1
   * and 64, about 200 input / 128 output tokens).
   */
  'qwen2.5-7b-fp16-l4': {
    cost: {
      model: { parameters: 7.616e9, layers: 28, kvHeads: 4, headDim: 128, weightBytes: 2, kvBytes: 2 },
      gpu: { count: 1, memoryBytes: L4.memoryBytes, bandwidthBytesPerS: L4.bandwidthBytesPerS, peakFlops: L4.fp16Flops },
      calibration: { efficiency: 0.88, fixedOverheadMs: 1 },
    },
    ...VLLM_SMALL_GPU,
  },
} as const satisfies Readonly<Record<string, EnginePreset>>;

export type PresetName = keyof typeof ENGINE_PRESETS;

export const PRESET_NAMES = Object.keys(ENGINE_PRESETS) as PresetName[];

export function isPresetName(name: string): name is PresetName {
  return Object.hasOwn(ENGINE_PRESETS, name);
}

/** The scheduler limits a preset brings: vLLM's KV blocks for this block size, max_num_seqs, max_num_batched_tokens. */
export function presetLimits(name: PresetName, blockSize: number): { numGpuBlocks: number; maxNumSeqs: number; maxNumBatchedTokens: number } {
  const preset: EnginePreset = ENGINE_PRESETS[name];
  return {
    numGpuBlocks: kvBlocks(preset.cost, blockSize, GPU_MEMORY_UTILIZATION),
    maxNumSeqs: preset.maxNumSeqs,
    maxNumBatchedTokens: preset.maxNumBatchedTokens,
  };
}
