/**
 * Options of the load client: typed, frozen, validated as a whole. CLI strings go through
 * {@link loadOptionsFromCli}; library callers pass numbers to {@link resolveLoadOptions}.
 * Two sibling modes share everything but the target: `target` (gRPC Generate at an engine or
 * sidecar) or `openai` (chat/completions at an OpenAI-compatible HTTP frontend); exactly one.
 */
import { ConfigError, OptionError } from '../../platform/config/config-error.js';
import { parseHostPort } from '../../platform/config/host-port.js';
import { redactUrlCredentials } from '../../platform/log.js';
export interface IntRange {
  readonly min: number;
  readonly max: number;
}

export type Arrival = 'poisson' | 'fixed';
export type OpenAiApi = 'chat' | 'completions';

export interface LoadOptions {
  /** host:port of a vllm.grpc.engine.VllmEngine server (engine or sidecar). Excludes openai. */
  readonly target: string | undefined;
  /** Base URL of an OpenAI-compatible server, normalised to end in /v1. Excludes target. */
  readonly openai: string | undefined;
  /** --openai: the `model` sent; undefined = the first of GET /v1/models, asked once at start. */
  readonly model: string | undefined;
  /** --openai: POST /v1/chat/completions (one user message) or /v1/completions (`prompt`). */
  readonly api: OpenAiApi;
  /** --openai: HTTP statuses counted (and retried) as rejections rather than errors. */
  readonly overloadStatuses: readonly number[];
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
  /** Per-attempt gRPC deadline, or HTTP request timeout (--openai); undefined = none. */
  readonly deadlineMs: number | undefined;
  /** Retries per request on RESOURCE_EXHAUSTED (or an overload status) only; 0 = never retry. */
  readonly retry: number;
  readonly retryBaseMs: number;
  /** Cap of the exponential backoff, and of a server's Retry-After (--openai). */
  readonly retryMaxMs: number;
  readonly stream: boolean;
  /** After the stop condition, in-flight calls get this long to finish, then are cancelled. */
  readonly graceS: number;
  readonly progressIntervalMs: number;
}

/** The frontend's answer when every worker is busy (Dynamo's default; DYN_HTTP_OVERLOAD_STATUS_CODE changes it). */
export const HTTP_OVERLOADED = 529;

export const DEFAULT_LOAD_OPTIONS: Omit<LoadOptions, 'target' | 'openai'> = Object.freeze({
  model: undefined,
  api: 'chat',
  overloadStatuses: Object.freeze([HTTP_OVERLOADED]),
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

/**
 * `http://host:8000`, `http://host:8000/v1/` or `http://host/prefix` as the base URL of the
 * API, always ending in /v1; a reason string when it is not an http(s) URL fetch can use.
 */
export function openAiBaseUrl(text: string): string | { readonly problem: string } {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    return { problem: 'must be an http:// or https:// URL such as http://127.0.0.1:8000' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { problem: 'must be an http:// or https:// URL' };
  // fetch refuses URLs with credentials; an API key would go in a header, which we do not send.
  if (url.username !== '' || url.password !== '') return { problem: 'must not contain credentials' };
  if (url.search !== '' || url.hash !== '') return { problem: 'must not have a query or fragment' };
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${path.endsWith('/v1') ? path : `${path}/v1`}`;
}

const ONLY_WITH_OPENAI = [
  ['model', '--model'],
  ['api', '--api'],
  ['overloadStatus', '--overload-status'],
] as const;

const sameStatuses = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((c, i) => c === b[i]);

export function resolveLoadOptions(input: Partial<LoadOptions>): LoadOptions {
  const o = { ...DEFAULT_LOAD_OPTIONS, ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) } as LoadOptions;
  const errors: OptionError[] = [];
  const bad = (flag: string, message: string, got: unknown): void => {
    errors.push(new OptionError(flag, `${message}, got ${JSON.stringify(got)}`));
  };
  let openai = o.openai;
  if (o.target !== undefined && o.openai !== undefined) {
    errors.push(new OptionError('--openai', 'cannot be combined with --target: drive either a gRPC target or an OpenAI-compatible HTTP server'));
  } else if (o.target === undefined && o.openai === undefined) {
    errors.push(new OptionError('--target', 'is required (HOST:PORT of the engine or sidecar), or --openai URL of an OpenAI-compatible server'));
  }
  if (o.target !== undefined && typeof parseHostPort(String(o.target), false) === 'string') bad('--target', 'must be HOST:PORT', o.target);
  if (o.openai !== undefined) {
    const base = openAiBaseUrl(String(o.openai));
    if (typeof base === 'string') openai = base;
    else bad('--openai', base.problem, redactUrlCredentials(String(o.openai)));
  } else {
    // Values other than the defaults (resolving resolved options again must pass); the CLI
    // also refuses the flags given with their default values.
    if (o.model !== undefined) errors.push(new OptionError('--model', 'applies only with --openai'));
    if (o.api !== DEFAULT_LOAD_OPTIONS.api) errors.push(new OptionError('--api', 'applies only with --openai'));
    if (!Array.isArray(o.overloadStatuses) || !sameStatuses(o.overloadStatuses, DEFAULT_LOAD_OPTIONS.overloadStatuses)) {
      errors.push(new OptionError('--overload-status', 'applies only with --openai'));
    }
  }
  if (o.model !== undefined && (typeof o.model !== 'string' || o.model.trim() === '')) bad('--model', 'must be a non-empty name', o.model);
  if (o.api !== 'chat' && o.api !== 'completions') bad('--api', "must be 'chat' or 'completions'", o.api);
  if (!Array.isArray(o.overloadStatuses) || o.overloadStatuses.length === 0 || !o.overloadStatuses.every((c) => isInt(c, 400, 599))) {
    bad('--overload-status', 'must be HTTP status codes from 400 to 599', o.overloadStatuses);
  }
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
  if (!isPositive(o.retryBaseMs)) bad('retryBaseMs', 'must be > 0', o.retryBaseMs);
  else if (!isPositive(o.retryMaxMs) || o.retryMaxMs < o.retryBaseMs) bad('--retry-max-ms', `must be a number >= ${o.retryBaseMs} (the first backoff)`, o.retryMaxMs);
  if (typeof o.graceS !== 'number' || !(o.graceS >= 0)) bad('--grace-s', 'must be a number >= 0', o.graceS);
  if (!isPositive(o.progressIntervalMs)) bad('progressIntervalMs', 'must be > 0', o.progressIntervalMs);
  if (errors.length > 0) throw ConfigError.of(errors);
  const both = o.durationS === undefined && o.count === undefined;
  return Object.freeze({
    ...o,
    target: o.target,
    openai,
    overloadStatuses: Object.freeze([...new Set(o.overloadStatuses)]),
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
  openai?: string;
  model?: string;
  api?: string;
  /** Repeatable; each may be a comma-separated list. Added to 529. */
  overloadStatus?: string | string[];
  retryMaxMs?: string;
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
  retryMaxMs: '--retry-max-ms',
  graceS: '--grace-s',
} as const;

/** Strict parse of CLI strings, then {@link resolveLoadOptions}; throws ConfigError naming every bad flag. */
export function loadOptionsFromCli(values: LoadCliValues): LoadOptions {
  const errors: OptionError[] = [];
  const out: Record<string, unknown> = { arrival: values.arrival, stream: values.stream, target: values.target, openai: values.openai, model: values.model, api: values.api };
  if (values.openai === undefined) {
    for (const [key, flag] of ONLY_WITH_OPENAI) if (values[key] !== undefined) errors.push(new OptionError(flag, 'applies only with --openai'));
  }
  if (values.overloadStatus !== undefined && values.openai !== undefined) {
    const raw = [values.overloadStatus].flat().join(',');
    const codes = raw.split(',').map((c) => (/^\s*\d{3}\s*$/.test(c) ? Number(c) : Number.NaN));
    if (codes.some(Number.isNaN)) errors.push(new OptionError('--overload-status', `must be HTTP status codes such as 503 (comma-separated or repeated), got '${raw}'`));
    else out['overloadStatuses'] = [HTTP_OVERLOADED, ...codes];
  }
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
    options = resolveLoadOptions(out);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // A flag already refused as unparsable is not reported again for its (absent) value.
    const reported = new Set(errors.map((e) => e.flag));
    errors.push(...error.errors.filter((e) => !reported.has(e.flag)));
  }
  if (errors.length > 0 || options === undefined) throw ConfigError.of(errors);
  return options;
}
