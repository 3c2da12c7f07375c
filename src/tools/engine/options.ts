/**
 * Options of the simulated engine, in one table: flag, environment twin (DYN_SIM_ENGINE_*),
 * typed default and help text. The `engine` command builds its commander options and --help
 * from it; {@link engineOptionsFromCli} reads flags over env with the OptionReader, and
 * {@link resolveEngineOptions} (library callers: tests, bench, the demo) takes typed overrides.
 * Both validate the whole and report every problem at once (ConfigError), each naming its flag,
 * or the variable it came from.
 */
import { Problems } from '../../platform/config/config-error.js';
import { OptionReader, type Env } from '../../platform/config/option-reader.js';
import type { OptionSpec } from '../../platform/config/option-spec.js';
import { isPresetName, PRESET_NAMES, presetLimits } from './presets.js';

/** How a step's duration is decided; `auto` is `roofline` with a preset, else `fixed` (step-cost.ts). */
export const COST_MODELS = ['auto', 'fixed', 'roofline'] as const;
export type CostModelChoice = (typeof COST_MODELS)[number];

/** The gRPC protocol the engine speaks (docs/simulated-engine.md): the sidecar's --generate-wire of the same layout. */
export const ENGINE_PROTOCOLS = ['smg-vllm', 'vllm-legacy', 'vllm-native', 'sglang-native'] as const;
export type EngineProtocol = (typeof ENGINE_PROTOCOLS)[number];

/** sglang-native: whether output_ids are each message's new ids (SGLang's --incremental-streaming-output) or all so far (its default). */
export const SGLANG_OUTPUTS = ['cumulative', 'incremental'] as const;
export type SglangOutput = (typeof SGLANG_OUTPUTS)[number];

export interface EngineOptions {
  readonly protocol: EngineProtocol;
  readonly sglangOutput: SglangOutput;
  /**
   * A real model x GPU pair (presets.ts) or `none`: its GPU cost model prices each step, and its
   * vLLM defaults replace those of numGpuBlocks, maxNumSeqs and maxNumBatchedTokens that are not
   * given explicitly.
   */
  readonly preset: string;
  /** `fixed`: decodeStepMs + prefill at prefillTokensPerS; `roofline`: the preset's cost model; `auto`: roofline with a preset. */
  readonly costModel: CostModelChoice;
  /**
   * Every step lasts this many times longer. A real GPU's steps of a few ms would make the
   * proxies' CPU, not the engine, the bottleneck of a benchmark on a small machine; scaling the
   * engine's time keeps the engine the slow part while every ratio between steps stays the same.
   */
  readonly timeScale: number;
  /**
   * Data-parallel ranks. Each rank is an engine core of its own (as in vLLM): its own scheduler,
   * KV pool of numGpuBlocks blocks, max_num_seqs and step budget.
   */
  readonly dataParallelSize: number;
  /** KV cache size in blocks (vLLM's num_gpu_blocks), per dp rank. */
  readonly numGpuBlocks: number;
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** Most sequences in the running set at once, per dp rank. */
  readonly maxNumSeqs: number;
  /** Token budget of one scheduler step (decode tokens + prefill chunk tokens), per dp rank. */
  readonly maxNumBatchedTokens: number;
  /** Prefill speed; a step that prefills P tokens lasts P / rate seconds longer. */
  readonly prefillTokensPerS: number;
  /** Duration of a step that decodes; every running, prefilled sequence gains one token. */
  readonly decodeStepMs: number;
  /** Upper bound on output tokens per request; larger `max_tokens` are clamped to it. */
  readonly maxOutputTokens: number;
  /** Context limit (prompt + output); 0 = the whole KV cache, numGpuBlocks * blockSize. */
  readonly maxModelLen: number;
  /** Chance, per generated token, that the sequence stops early with finish_reason "stop". */
  readonly earlyStopProb: number;
  /** Seeds generated token ids and early stops, so that runs are reproducible. */
  readonly seed: number;
  readonly vocabSize: number;
  readonly modelName: string;
  readonly host: string;
  /** gRPC port; 0 lets the OS pick a free one. */
  readonly port: number;
  /** Prometheus /metrics port; 0 lets the OS pick a free one. */
  readonly metricsPort: number;
}

export const ENGINE_OPTIONS = {
  protocol: {
    flag: '--protocol <name>',
    env: 'DYN_SIM_ENGINE_PROTOCOL',
    default: 'smg-vllm',
    help: "the gRPC protocol served: smg-vllm (SMG's vllm.grpc.engine.VllmEngine, as vllm serve --grpc), vllm-legacy (the same before 2026-01), vllm-native (vLLM's own vllm.Inference and vllm.Control), sglang-native (SGLang's own sglang.runtime.v1.SglangService); the sidecar's --generate-wire is vllm, vllm-legacy, vllm-native or sglang-native",
  },
  sglangOutput: {
    flag: '--sglang-output <form>',
    env: 'DYN_SIM_ENGINE_SGLANG_OUTPUT',
    default: 'cumulative',
    help: "sglang-native's output_ids: cumulative (every message holds all ids so far, SGLang's default) or incremental (new ids only, as --incremental-streaming-output)",
  },
  preset: {
    flag: '--preset <name>',
    env: 'DYN_SIM_ENGINE_PRESET',
    default: 'none',
    help: `a real model x GPU pair: its GPU cost model prices each step and its vLLM defaults set --num-gpu-blocks, --max-num-seqs and --max-num-batched-tokens unless given (${PRESET_NAMES.join(', ')}; none = the fixed step)`,
  },
  costModel: {
    flag: '--cost-model <model>',
    env: 'DYN_SIM_ENGINE_COST_MODEL',
    default: 'auto',
    help: "step duration: fixed (--decode-step-ms per decode step + prefill at --prefill-tokens-per-s), roofline (the preset's GPU cost model: grows with batch and context), auto (roofline with --preset, else fixed)",
  },
  timeScale: {
    flag: '--time-scale <x>',
    env: 'DYN_SIM_ENGINE_TIME_SCALE',
    default: 1,
    help: "every step lasts x times longer, so a small machine's proxies are not the bottleneck of a fast model's benchmark",
  },
  dataParallelSize: {
    flag: '--data-parallel-size <n>',
    env: 'DYN_SIM_ENGINE_DATA_PARALLEL_SIZE',
    default: 1,
    help: 'dp ranks, each with its own scheduler and KV cache; a call picks one with data_parallel_rank or x-data-parallel-rank, else the least loaded',
  },
  numGpuBlocks: {
    flag: '--num-gpu-blocks <n>',
    env: 'DYN_SIM_ENGINE_NUM_GPU_BLOCKS',
    default: 2048,
    defaultText: "2048 (with --preset: the preset's)",
    help: 'KV cache size in blocks per dp rank (vllm:cache_config_info num_gpu_blocks)',
  },
  blockSize: { flag: '--block-size <tokens>', env: 'DYN_SIM_ENGINE_BLOCK_SIZE', default: 16, help: 'tokens per KV block' },
  maxNumSeqs: {
    flag: '--max-num-seqs <n>',
    env: 'DYN_SIM_ENGINE_MAX_NUM_SEQS',
    default: 256,
    defaultText: "256 (with --preset: the preset's)",
    help: 'most sequences running at once per dp rank; more wait in its queue',
  },
  maxNumBatchedTokens: {
    flag: '--max-num-batched-tokens <n>',
    env: 'DYN_SIM_ENGINE_MAX_NUM_BATCHED_TOKENS',
    default: 8192,
    defaultText: "8192 (with --preset: the preset's)",
    help: 'token budget of one scheduler step per dp rank (decode + prefill chunks)',
  },
  prefillTokensPerS: {
    flag: '--prefill-tokens-per-s <rate>',
    env: 'DYN_SIM_ENGINE_PREFILL_TOKENS_PER_S',
    default: 50_000,
    help: 'prefill speed in tokens/s under the fixed cost model; a step lasts prefill tokens / rate longer',
  },
  decodeStepMs: {
    flag: '--decode-step-ms <ms>',
    env: 'DYN_SIM_ENGINE_DECODE_STEP_MS',
    default: 20,
    help: 'duration of a decode step under the fixed cost model; each running sequence gains one token per step',
  },
  maxOutputTokens: {
    flag: '--max-output-tokens <n>',
    env: 'DYN_SIM_ENGINE_MAX_OUTPUT_TOKENS',
    default: 4096,
    help: 'cap on output tokens per request; larger max_tokens are clamped',
  },
  maxModelLen: {
    flag: '--max-model-len <tokens>',
    env: 'DYN_SIM_ENGINE_MAX_MODEL_LEN',
    default: 0,
    help: 'context limit, prompt + output; 0 = the whole KV cache',
  },
  earlyStopProb: {
    flag: '--early-stop-prob <p>',
    env: 'DYN_SIM_ENGINE_EARLY_STOP_PROB',
    default: 0,
    help: 'per-token chance of finishing early with finish_reason "stop" (0..1)',
  },
  seed: { flag: '--seed <n>', env: 'DYN_SIM_ENGINE_SEED', default: 0, help: 'seed of generated token ids and early stops' },
  vocabSize: { flag: '--vocab-size <n>', env: 'DYN_SIM_ENGINE_VOCAB_SIZE', default: 32_000, help: 'token ids are drawn from 1 .. vocab-size - 1' },
  modelName: {
    flag: '--model-name <name>',
    env: 'DYN_SIM_ENGINE_MODEL_NAME',
    default: 'simulated-model',
    help: 'model name in GetModelInfo and the model_name metric label',
  },
  host: { flag: '--host <host>', env: 'DYN_SIM_ENGINE_HOST', default: '127.0.0.1', help: 'address both servers listen on' },
  port: { flag: '--port <port>', env: 'DYN_SIM_ENGINE_PORT', default: 0, help: 'gRPC port (0 = any free port)' },
  metricsPort: { flag: '--metrics-port <port>', env: 'DYN_SIM_ENGINE_METRICS_PORT', default: 0, help: 'Prometheus /metrics port (0 = any free port)' },
} as const satisfies Readonly<Record<keyof EngineOptions, OptionSpec>>;

type EngineKey = keyof EngineOptions;
const KEYS = Object.keys(ENGINE_OPTIONS) as EngineKey[];

type TableDefaults = { readonly [K in EngineKey]: (typeof ENGINE_OPTIONS)[K]['default'] };

/** The table's defaults, as one options object (the type check makes every option have one). */
export const DEFAULT_ENGINE_OPTIONS: EngineOptions = Object.freeze(Object.fromEntries(KEYS.map((key) => [key, ENGINE_OPTIONS[key].default])) as TableDefaults);

type NumericKey = { [K in EngineKey]: EngineOptions[K] extends number ? K : never }[EngineKey];

/** The flag of an option (`--num-gpu-blocks`): what errors name when a library caller passed the value. */
const flagOf = (key: EngineKey): string => ENGINE_OPTIONS[key].flag.replace(/ .*/, '');

interface NumberRule {
  readonly integer: boolean;
  readonly min: number;
  readonly max: number;
  readonly minExclusive?: boolean;
}

const UINT32_MAX = 0xffff_ffff;
/** Most dp ranks; vLLM has no such cap, this one keeps a typo from starting thousands of schedulers. */
const MAX_DATA_PARALLEL_SIZE = 64;

const RULES: Readonly<Record<NumericKey, NumberRule>> = {
  dataParallelSize: { integer: true, min: 1, max: MAX_DATA_PARALLEL_SIZE },
  numGpuBlocks: { integer: true, min: 1, max: 1e8 },
  blockSize: { integer: true, min: 1, max: 65_536 },
  maxNumSeqs: { integer: true, min: 1, max: 1e6 },
  maxNumBatchedTokens: { integer: true, min: 1, max: 1e9 },
  prefillTokensPerS: { integer: false, min: 0, max: 1e12, minExclusive: true },
  decodeStepMs: { integer: false, min: 0, max: 600_000, minExclusive: true },
  timeScale: { integer: false, min: 0, max: 10_000, minExclusive: true },
  maxOutputTokens: { integer: true, min: 1, max: UINT32_MAX },
  maxModelLen: { integer: true, min: 0, max: UINT32_MAX },
  earlyStopProb: { integer: false, min: 0, max: 1 },
  seed: { integer: true, min: 0, max: UINT32_MAX },
  vocabSize: { integer: true, min: 2, max: UINT32_MAX },
  port: { integer: true, min: 0, max: 65_535 },
  metricsPort: { integer: true, min: 0, max: 65_535 },
};

function describe(rule: NumberRule): string {
  const kind = rule.integer ? 'an integer' : 'a number';
  const low = rule.minExclusive ? `> ${rule.min}` : `>= ${rule.min}`;
  return `must be ${kind} ${low} and <= ${rule.max}`;
}

/** Where each value came from, for problems: the flag (also for library callers) or the env twin. */
type Sources = Partial<Record<EngineKey, string>>;

function checkNumber(key: NumericKey, value: unknown, source: string, problems: Problems): void {
  const rule = RULES[key];
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (!rule.integer || Number.isInteger(value)) &&
    (rule.minExclusive ? value > rule.min : value >= rule.min) &&
    value <= rule.max;
  if (!ok) problems.report(source, `: ${describe(rule)}, got ${JSON.stringify(value)}`);
}

/** Merges overrides over the defaults and validates; throws {@link ConfigError}. */
export function resolveEngineOptions(overrides: Partial<EngineOptions> = {}): EngineOptions {
  const problems = new Problems();
  const options = resolve(overrides, {}, problems);
  problems.check('ERR_ENGINE_CONFIG');
  return options;
}

/** The merged options, valid only when it reported no problem. */
function resolve(overrides: Partial<EngineOptions>, sources: Sources, problems: Problems): EngineOptions {
  const given = Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined)) as Partial<EngineOptions>;
  const source = (key: EngineKey): string => sources[key] ?? flagOf(key);
  const before = problems.problems.length;
  const preset = given.preset ?? DEFAULT_ENGINE_OPTIONS.preset;
  const presetKnown = typeof preset === 'string' && (preset === 'none' || isPresetName(preset));
  if (!presetKnown) problems.report(source('preset'), `: must be one of none, ${PRESET_NAMES.join(', ')}, got ${JSON.stringify(preset)}`);
  // A preset's vLLM defaults sit between the table's defaults and what was given explicitly.
  const blockSize = given.blockSize ?? DEFAULT_ENGINE_OPTIONS.blockSize;
  const presetDefaults = presetKnown && isPresetName(preset) && validBlockSize(blockSize) ? presetLimits(preset, blockSize) : {};
  const merged: EngineOptions = { ...DEFAULT_ENGINE_OPTIONS, ...presetDefaults, ...given };
  if (!(COST_MODELS as readonly unknown[]).includes(merged.costModel)) {
    problems.report(source('costModel'), `: must be one of ${COST_MODELS.join(', ')}, got ${JSON.stringify(merged.costModel)}`);
  } else if (merged.costModel === 'roofline' && merged.preset === 'none') {
    problems.report(source('costModel'), `: roofline prices a real model on a real GPU, so it needs --preset (${PRESET_NAMES.join(', ')})`);
  }
  if (!(ENGINE_PROTOCOLS as readonly unknown[]).includes(merged.protocol)) {
    problems.report(source('protocol'), `: must be one of ${ENGINE_PROTOCOLS.join(', ')}, got ${JSON.stringify(merged.protocol)}`);
  }
  if (!(SGLANG_OUTPUTS as readonly unknown[]).includes(merged.sglangOutput)) {
    problems.report(source('sglangOutput'), `: must be one of ${SGLANG_OUTPUTS.join(', ')}, got ${JSON.stringify(merged.sglangOutput)}`);
  }
  for (const key of Object.keys(RULES) as NumericKey[]) checkNumber(key, merged[key], source(key), problems);
  for (const key of ['modelName', 'host'] as const) {
    if (typeof merged[key] !== 'string' || merged[key].trim() === '') {
      problems.report(source(key), `: must be a non-empty string, got ${JSON.stringify(merged[key])}`);
    }
  }
  // Only when every value above is valid: the KV cache's size is computed from two of them.
  if (problems.problems.length === before && merged.maxModelLen > merged.numGpuBlocks * merged.blockSize) {
    problems.report(
      source('maxModelLen'),
      `: must not exceed the KV cache (${merged.numGpuBlocks} blocks * ${merged.blockSize} = ${merged.numGpuBlocks * merged.blockSize} tokens), got ${merged.maxModelLen}`,
    );
  }
  return Object.freeze(merged);
}

function validBlockSize(value: unknown): value is number {
  const rule = RULES.blockSize;
  return typeof value === 'number' && Number.isInteger(value) && value >= rule.min && value <= rule.max;
}

/** The effective context limit: maxModelLen, or the whole KV cache when it is 0. */
export function effectiveMaxModelLen(options: EngineOptions): number {
  return options.maxModelLen > 0 ? options.maxModelLen : options.numGpuBlocks * options.blockSize;
}

/** Raw flag values as commander hands them, keyed like the options; a missing key is unset. */
export type EngineCliValues = Partial<Record<EngineKey, string>>;

/**
 * Reads flags over their DYN_SIM_ENGINE_* twins with the OptionReader, parses numbers strictly
 * (Number("") and "1e3abc" are refused, unlike parseInt), then validates. Throws
 * {@link ConfigError} listing every bad flag or variable.
 */
export function engineOptionsFromCli(values: EngineCliValues, env: Env = {}): EngineOptions {
  const read = new OptionReader(values, env, ENGINE_OPTIONS);
  const overrides: Record<string, unknown> = {};
  const sources: Sources = {};
  for (const key of KEYS) {
    const found = read.raw(key);
    if (found === undefined) continue;
    sources[key] = found.source;
    if (key === 'preset' || key === 'costModel' || key === 'protocol' || key === 'sglangOutput') {
      overrides[key] = found.value.trim();
      continue;
    }
    if (key === 'modelName' || key === 'host') {
      overrides[key] = found.value;
      continue;
    }
    const trimmed = found.value.trim();
    const value = trimmed === '' ? Number.NaN : Number(trimmed);
    if (Number.isNaN(value)) {
      read.report(found.source, `: ${describe(RULES[key])}, got '${found.value}'`);
      continue;
    }
    overrides[key] = value;
  }
  // Unparsable values were left out above, so resolving still reports every other bad value.
  const options = resolve(overrides, sources, read);
  read.check('ERR_ENGINE_CONFIG');
  return options;
}
