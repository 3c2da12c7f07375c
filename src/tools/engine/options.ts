/**
 * Options of the simulated engine: one typed, frozen object, built from defaults plus
 * overrides and validated as a whole so that every problem is reported, not just the first.
 */
import { ConfigError, OptionError } from '../../platform/config/config-error.js';
export interface EngineOptions {
  /** KV cache size in blocks (vLLM's num_gpu_blocks). */
  readonly numGpuBlocks: number;
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** Most sequences in the running set at once. */
  readonly maxNumSeqs: number;
  /** Token budget of one scheduler step (decode tokens + prefill chunk tokens). */
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

export const DEFAULT_ENGINE_OPTIONS: EngineOptions = Object.freeze({
  numGpuBlocks: 2048,
  blockSize: 16,
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  prefillTokensPerS: 50_000,
  decodeStepMs: 20,
  maxOutputTokens: 4096,
  maxModelLen: 0,
  earlyStopProb: 0,
  seed: 0,
  vocabSize: 32_000,
  modelName: 'simulated-model',
  host: '127.0.0.1',
  port: 0,
  metricsPort: 0,
});

type NumericKey = { [K in keyof EngineOptions]: EngineOptions[K] extends number ? K : never }[keyof EngineOptions];

/** CLI flag of each option, used in error messages for library callers too. */
export const ENGINE_FLAGS: Readonly<Record<keyof EngineOptions, string>> = Object.freeze({
  numGpuBlocks: '--num-gpu-blocks',
  blockSize: '--block-size',
  maxNumSeqs: '--max-num-seqs',
  maxNumBatchedTokens: '--max-num-batched-tokens',
  prefillTokensPerS: '--prefill-tokens-per-s',
  decodeStepMs: '--decode-step-ms',
  maxOutputTokens: '--max-output-tokens',
  maxModelLen: '--max-model-len',
  earlyStopProb: '--early-stop-prob',
  seed: '--seed',
  vocabSize: '--vocab-size',
  modelName: '--model-name',
  host: '--host',
  port: '--port',
  metricsPort: '--metrics-port',
});

interface NumberRule {
  readonly integer: boolean;
  readonly min: number;
  readonly max: number;
  readonly minExclusive?: boolean;
}

const UINT32_MAX = 0xffff_ffff;
const RULES: Readonly<Record<NumericKey, NumberRule>> = {
  numGpuBlocks: { integer: true, min: 1, max: 1e8 },
  blockSize: { integer: true, min: 1, max: 65_536 },
  maxNumSeqs: { integer: true, min: 1, max: 1e6 },
  maxNumBatchedTokens: { integer: true, min: 1, max: 1e9 },
  prefillTokensPerS: { integer: false, min: 0, max: 1e12, minExclusive: true },
  decodeStepMs: { integer: false, min: 0, max: 600_000, minExclusive: true },
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

function checkNumber(key: NumericKey, value: unknown): OptionError | undefined {
  const rule = RULES[key];
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (!rule.integer || Number.isInteger(value)) &&
    (rule.minExclusive ? value > rule.min : value >= rule.min) &&
    value <= rule.max;
  return ok ? undefined : new OptionError(ENGINE_FLAGS[key], `${describe(rule)}, got ${JSON.stringify(value)}`);
}

/** Merges overrides over the defaults and validates; throws {@link ConfigError}. */
export function resolveEngineOptions(overrides: Partial<EngineOptions> = {}): EngineOptions {
  const merged: EngineOptions = { ...DEFAULT_ENGINE_OPTIONS };
  for (const [key, value] of Object.entries(overrides)) {
    if (value !== undefined) (merged as unknown as Record<string, unknown>)[key] = value;
  }
  const errors: OptionError[] = [];
  for (const key of Object.keys(RULES) as NumericKey[]) {
    const error = checkNumber(key, merged[key]);
    if (error) errors.push(error);
  }
  for (const key of ['modelName', 'host'] as const) {
    if (typeof merged[key] !== 'string' || merged[key].trim() === '') {
      errors.push(new OptionError(ENGINE_FLAGS[key], `must be a non-empty string, got ${JSON.stringify(merged[key])}`));
    }
  }
  if (errors.length === 0 && merged.maxModelLen > merged.numGpuBlocks * merged.blockSize) {
    errors.push(
      new OptionError(
        ENGINE_FLAGS.maxModelLen,
        `must not exceed the KV cache (${merged.numGpuBlocks} blocks * ${merged.blockSize} = ${merged.numGpuBlocks * merged.blockSize} tokens), got ${merged.maxModelLen}`,
      ),
    );
  }
  if (errors.length > 0) throw ConfigError.of(errors);
  return Object.freeze(merged);
}

/** The effective context limit: maxModelLen, or the whole KV cache when it is 0. */
export function effectiveMaxModelLen(options: EngineOptions): number {
  return options.maxModelLen > 0 ? options.maxModelLen : options.numGpuBlocks * options.blockSize;
}

/** Raw CLI strings, keyed like the options; a missing key keeps the default. */
export type EngineCliValues = Partial<Record<keyof EngineOptions, string>>;

/**
 * Parses CLI strings strictly (Number("") and "1e3abc" are rejected, unlike parseInt), then
 * validates. Throws {@link ConfigError} listing every bad flag.
 */
export function engineOptionsFromCli(values: EngineCliValues): EngineOptions {
  const overrides: Record<string, unknown> = {};
  const errors: OptionError[] = [];
  for (const [key, raw] of Object.entries(values) as [keyof EngineOptions, string | undefined][]) {
    if (raw === undefined) continue;
    if (key === 'modelName' || key === 'host') {
      overrides[key] = raw;
      continue;
    }
    const trimmed = raw.trim();
    const value = trimmed === '' ? Number.NaN : Number(trimmed);
    if (Number.isNaN(value)) {
      errors.push(new OptionError(ENGINE_FLAGS[key], `${describe(RULES[key])}, got '${raw}'`));
      continue;
    }
    overrides[key] = value;
  }
  // Unparsable flags were left out above, so resolving still reports every other bad value.
  let options: EngineOptions | undefined;
  try {
    options = resolveEngineOptions(overrides);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    errors.push(...error.errors);
  }
  if (errors.length > 0 || options === undefined) throw ConfigError.of(errors);
  return options;
}
