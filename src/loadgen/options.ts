/**
 * Options of the load client: typed, frozen, validated as a whole. CLI strings go through
 * {@link loadOptionsFromCli}; library callers pass numbers to {@link resolveLoadOptions}.
 */
import { ConfigError, OptionError } from '../config/config-error.js';
import { parseHostPort } from '../config/host-port.js';
export interface IntRange {
  readonly min: number;
  readonly max: number;
}

export type Arrival = 'poisson' | 'fixed';

export interface LoadOptions {
  /** host:port of a vllm.grpc.engine.VllmEngine server (engine or sidecar). */
  readonly target: string;
  /** Closed loop: this many requests in flight, each followed at once by the next. */
  readonly concurrency: number | undefined;
  /** Open loop: new requests per second, whatever is in flight. Excludes concurrency. */
  readonly rate: number | undefined;
  readonly arrival: Arrival;
  readonly promptTokens: IntRange;
  readonly maxTokens: IntRange;
  /** Stop starting requests after this long ... */
  readonly durationS: number | undefined;
  /** ... or after this many requests (first attempts), whichever comes first. */
  readonly count: number | undefined;
  readonly seed: number;
  /** Per-attempt gRPC deadline; undefined = none. */
  readonly deadlineMs: number | undefined;
  /** Retries per request on RESOURCE_EXHAUSTED only; 0 = never retry. */
  readonly retry: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly stream: boolean;
  /** After the stop condition, in-flight calls get this long to finish, then are cancelled. */
  readonly graceS: number;
  readonly progressIntervalMs: number;
}

export const DEFAULT_LOAD_OPTIONS: Omit<LoadOptions, 'target'> = Object.freeze({
  concurrency: undefined,
  rate: undefined,
  arrival: 'poisson',
  promptTokens: { min: 128, max: 128 },
  maxTokens: { min: 64, max: 64 },
  durationS: undefined,
  count: undefined,
  seed: 0,
  deadlineMs: undefined,
  retry: 0,
  retryBaseMs: 50,
  retryMaxMs: 5000,
  stream: true,
  graceS: 30,
  progressIntervalMs: 1000,
});

/** Used when neither a duration nor a count is given. */
export const DEFAULT_DURATION_S = 10;
/** Used when neither a concurrency nor a rate is given. */
export const DEFAULT_CONCURRENCY = 1;

const isInt = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
const isPositive = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;

export function resolveLoadOptions(input: Partial<LoadOptions> & { target: string }): LoadOptions {
  const o = { ...DEFAULT_LOAD_OPTIONS, ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) } as LoadOptions;
  const errors: OptionError[] = [];
  const bad = (flag: string, message: string, got: unknown): void => {
    errors.push(new OptionError(flag, `${message}, got ${JSON.stringify(got)}`));
  };
  if (typeof parseHostPort(String(o.target), false) === 'string') bad('--target', 'must be HOST:PORT', o.target);
  if (o.concurrency !== undefined && o.rate !== undefined) {
    errors.push(new OptionError('--rate', 'cannot be combined with --concurrency: choose a closed (concurrency) or open (rate) loop'));
  }
  if (o.concurrency !== undefined && !isInt(o.concurrency, 1, 100_000)) bad('--concurrency', 'must be an integer from 1 to 100000', o.concurrency);
  if (o.rate !== undefined && !(isPositive(o.rate) && o.rate <= 1e6)) bad('--rate', 'must be a number > 0 and <= 1000000', o.rate);
  if (o.arrival !== 'poisson' && o.arrival !== 'fixed') bad('--arrival', "must be 'poisson' or 'fixed'", o.arrival);
  for (const [flag, range, min] of [
    ['--prompt-tokens', o.promptTokens, 1],
    ['--max-tokens', o.maxTokens, 1],
  ] as const) {
    if (!isInt(range?.min, min, 0xffff_ffff) || !isInt(range?.max, range.min, 0xffff_ffff)) {
      bad(flag, `must be an integer >= ${min} or a range MIN-MAX with MIN <= MAX`, range);
    }
  }
  if (o.durationS !== undefined && !isPositive(o.durationS)) bad('--duration-s', 'must be a number > 0', o.durationS);
  if (o.count !== undefined && !isInt(o.count, 1)) bad('--count', 'must be an integer >= 1', o.count);
  if (!isInt(o.seed, 0, 0xffff_ffff)) bad('--seed', 'must be an integer from 0 to 4294967295', o.seed);
  if (o.deadlineMs !== undefined && !isPositive(o.deadlineMs)) bad('--deadline-ms', 'must be a number > 0', o.deadlineMs);
  if (!isInt(o.retry, 0, 100)) bad('--retry', 'must be an integer from 0 to 100', o.retry);
  if (!isPositive(o.retryBaseMs) || !isPositive(o.retryMaxMs) || o.retryMaxMs < o.retryBaseMs) bad('retryBaseMs', 'must be > 0 and <= retryMaxMs', o.retryBaseMs);
  if (typeof o.graceS !== 'number' || !(o.graceS >= 0)) bad('--grace-s', 'must be a number >= 0', o.graceS);
  if (!isPositive(o.progressIntervalMs)) bad('progressIntervalMs', 'must be > 0', o.progressIntervalMs);
  if (errors.length > 0) throw ConfigError.of(errors);
  const both = o.durationS === undefined && o.count === undefined;
  return Object.freeze({
    ...o,
    concurrency: o.rate === undefined ? (o.concurrency ?? DEFAULT_CONCURRENCY) : undefined,
    durationS: both ? DEFAULT_DURATION_S : o.durationS,
  });
}

/** "128" or "64-256" (inclusive). Returns undefined for anything else. */
export function parseIntRange(text: string): IntRange | undefined {
  const match = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(text);
  if (!match) return undefined;
  const min = Number(match[1]);
  return { min, max: match[2] === undefined ? min : Number(match[2]) };
}

export interface LoadCliValues {
  target?: string;
  concurrency?: string;
  rate?: string;
  arrival?: string;
  promptTokens?: string;
  maxTokens?: string;
  durationS?: string;
  count?: string;
  seed?: string;
  deadlineMs?: string;
  retry?: string;
  graceS?: string;
  stream?: boolean;
}

const NUMBER_FLAGS = {
  concurrency: '--concurrency',
  rate: '--rate',
  durationS: '--duration-s',
  count: '--count',
  seed: '--seed',
  deadlineMs: '--deadline-ms',
  retry: '--retry',
  graceS: '--grace-s',
} as const;

/** Strict parse of CLI strings, then {@link resolveLoadOptions}; throws ConfigError naming every bad flag. */
export function loadOptionsFromCli(values: LoadCliValues): LoadOptions {
  const errors: OptionError[] = [];
  const out: Record<string, unknown> = { arrival: values.arrival, stream: values.stream };
  if (values.target === undefined) errors.push(new OptionError('--target', 'is required (HOST:PORT of the engine or sidecar)'));
  for (const [key, flag] of Object.entries(NUMBER_FLAGS)) {
    const raw = values[key as keyof typeof NUMBER_FLAGS];
    if (raw === undefined) continue;
    const value = raw.trim() === '' ? Number.NaN : Number(raw);
    if (Number.isNaN(value)) errors.push(new OptionError(flag, `must be a number, got '${raw}'`));
    else out[key] = value;
  }
  for (const [key, flag] of [
    ['promptTokens', '--prompt-tokens'],
    ['maxTokens', '--max-tokens'],
  ] as const) {
    const raw = values[key];
    if (raw === undefined) continue;
    const range = parseIntRange(raw);
    if (range === undefined) errors.push(new OptionError(flag, `must be an integer N or a range MIN-MAX, got '${raw}'`));
    else out[key] = range;
  }
  let options: LoadOptions | undefined;
  try {
    options = resolveLoadOptions({ ...(out as Partial<LoadOptions>), target: values.target ?? '' });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // A missing target is already reported above; do not report it twice.
    errors.push(...error.errors.filter((e) => !(values.target === undefined && e.flag === '--target')));
  }
  if (errors.length > 0 || options === undefined) throw ConfigError.of(errors);
  return options;
}
