/**
 * The engines whose Prometheus metrics the sidecar can read (names in docs/wire-facts.md,
 * "Engine metrics"): a wire fact shared by the sidecar's config (--engine-metrics-format) and its
 * metrics reader.
 */
export type EngineMetricsFormat = 'vllm' | 'sglang' | 'trtllm-triton' | 'trtllm-serve';
export type EngineMetricsFormatOption = EngineMetricsFormat | 'auto';
export const ENGINE_METRICS_FORMATS: readonly EngineMetricsFormatOption[] = ['auto', 'vllm', 'sglang', 'trtllm-triton', 'trtllm-serve'];
