/**
 * Options of the load client, in one table: flag, environment twin (DYN_LOAD_CLIENT_*), typed
 * default and help text; the `load` command builds its commander options and --help from it.
 * CLI strings (flags over env, read with the OptionReader) go through loadSettingsFromCli
 * (cli-options.ts); library callers pass numbers to {@link resolveLoadOptions}. Both validate the whole and report
 * every problem at once (ConfigError), each naming its flag, or the variable it came from.
 * Two sibling modes share everything but the target: `target` (gRPC Generate at an engine or
 * sidecar) or `openai` (chat/completions at an OpenAI-compatible HTTP frontend); exactly one.
 */
import { Problems } from '../../platform/config/config-error.js';
import { parseHostPort } from '../../platform/config/host-port.js';
import type { OptionSpec } from '../../platform/config/option-spec.js';
import { redactUrlCredentials } from '../../platform/log.js';
import { checkPriority, checkTenant, MAX_PRIORITY, MIN_PRIORITY, PRIORITY_HEADER, TENANT_HEADER } from '../../protocol/request-class.js';

export interface IntRange {
  readonly min: number;
  readonly max: number;
}

export type Arrival = 'poisson' | 'fixed';
/** How lengths are drawn within their MIN-MAX range: evenly, or heavy-tailed (see draw in transport.ts). */
export type LengthDistribution = 'uniform' | 'lognormal';
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
  readonly lengthDistribution: LengthDistribution;
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
  /** The latency SLO a completed request must meet to count as goodput: TTFT ... */
  readonly sloTtftMs: number | undefined;
  /** ... and mean inter-token latency. Either set turns the goodput count on; an unset one is unbounded. */
  readonly sloItlMs: number | undefined;
  readonly progressIntervalMs: number;
  /** Every request's priority (int32, lower runs sooner), sent as x-request-priority; undefined = not sent. */
  readonly priority: number | undefined;
  /** Every request's tenant, sent as x-tenant-id; undefined = not sent. */
  readonly tenant: string | undefined;
}

/** The frontend's answer to a tenant at its --tenant-max-inflight: a rejection, counted apart from the overload statuses. */
export const HTTP_TENANT_CAPPED = 429;

/** The frontend's answer when every worker is busy (Dynamo's default; DYN_HTTP_OVERLOAD_STATUS_CODE changes it). */
export const HTTP_OVERLOADED = 529;

export const LOAD_OPTIONS = {
  target: { flag: '--target <host:port>', env: 'DYN_LOAD_CLIENT_TARGET', help: 'gRPC: engine or sidecar address (this or --openai is required)' },
  openai: {
    flag: '--openai <url>',
    env: 'DYN_LOAD_CLIENT_OPENAI',
    help: 'HTTP: base URL of an OpenAI-compatible server such as the frontend, e.g. http://127.0.0.1:8000 (/v1 optional); excludes --target',
  },
  model: {
    flag: '--model <name>',
    env: 'DYN_LOAD_CLIENT_MODEL',
    defaultText: 'the first of GET /v1/models, asked once at start',
    help: '--openai: model to ask for',
  },
  api: {
    flag: '--api <kind>',
    env: 'DYN_LOAD_CLIENT_API',
    default: 'chat',
    help: '--openai: chat (POST /v1/chat/completions, one user message) or completions (POST /v1/completions)',
  },
  overloadStatus: {
    flag: '--overload-status <code>',
    env: 'DYN_LOAD_CLIENT_OVERLOAD_STATUS',
    default: Object.freeze([HTTP_OVERLOADED]),
    defaultText: `${HTTP_OVERLOADED} only`,
    help: `--openai: also count this HTTP status as a rejection, besides ${HTTP_OVERLOADED} (repeatable or comma-separated; e.g. 503 for a frontend run with DYN_HTTP_OVERLOAD_STATUS_CODE=503)`,
  },
  concurrency: {
    flag: '--concurrency <n>',
    env: 'DYN_LOAD_CLIENT_CONCURRENCY',
    default: 1,
    defaultText: '1 when --rate is not given',
    help: 'closed loop: requests kept in flight',
  },
  rate: { flag: '--rate <per-s>', env: 'DYN_LOAD_CLIENT_RATE', help: 'open loop: new requests per second, whatever is in flight' },
  arrival: { flag: '--arrival <kind>', env: 'DYN_LOAD_CLIENT_ARRIVAL', default: 'poisson', help: 'open-loop spacing: poisson or fixed' },
  lengthDistribution: {
    flag: '--length-distribution <kind>',
    env: 'DYN_LOAD_CLIENT_LENGTH_DISTRIBUTION',
    default: 'uniform',
    help: 'how --prompt-tokens and --max-tokens are drawn within MIN-MAX: uniform, or lognormal (heavy-tailed, as real traffic: median the geometric mean of MIN and MAX, MIN and MAX at 2 sigma, cut at both)',
  },
  promptTokens: {
    flag: '--prompt-tokens <n|min-max>',
    env: 'DYN_LOAD_CLIENT_PROMPT_TOKENS',
    default: Object.freeze({ min: 128, max: 128 }),
    help: 'prompt length in tokens, fixed or uniform in a range',
  },
  maxTokens: {
    flag: '--max-tokens <n|min-max>',
    env: 'DYN_LOAD_CLIENT_MAX_TOKENS',
    default: Object.freeze({ min: 64, max: 64 }),
    help: 'max_tokens per request, fixed or uniform in a range',
  },
  durationS: {
    flag: '--duration-s <s>',
    env: 'DYN_LOAD_CLIENT_DURATION_S',
    default: 10,
    defaultText: '10 when --count is not given',
    help: 'stop starting requests after this many seconds',
  },
  count: {
    flag: '--count <n>',
    env: 'DYN_LOAD_CLIENT_COUNT',
    help: 'stop after this many requests (first attempts); with --duration-s, whichever comes first',
  },
  seed: {
    flag: '--seed <n>',
    env: 'DYN_LOAD_CLIENT_SEED',
    default: 0,
    help: 'seed of prompt lengths, token ids (--openai: words), arrivals and backoff jitter',
  },
  deadlineMs: {
    flag: '--deadline-ms <ms>',
    env: 'DYN_LOAD_CLIENT_DEADLINE_MS',
    defaultText: 'none',
    help: 'gRPC deadline, or HTTP request timeout (--openai), of each attempt',
  },
  retry: {
    flag: '--retry <n>',
    env: 'DYN_LOAD_CLIENT_RETRY',
    default: 0,
    help: 'retries per request on RESOURCE_EXHAUSTED honouring grpc-retry-pushback-ms, or (--openai) on the overload status honouring Retry-After; each attempt counts as sent',
  },
  retryMaxMs: {
    flag: '--retry-max-ms <ms>',
    env: 'DYN_LOAD_CLIENT_RETRY_MAX_MS',
    default: 5000,
    help: 'longest wait before a retry: cap of the exponential backoff and of Retry-After',
  },
  graceS: {
    flag: '--grace-s <s>',
    env: 'DYN_LOAD_CLIENT_GRACE_S',
    default: 30,
    help: 'after stopping, time given to in-flight calls before they are cancelled',
  },
  sloTtftMs: {
    flag: '--slo-ttft-ms <ms>',
    env: 'DYN_LOAD_CLIENT_SLO_TTFT_MS',
    defaultText: 'none',
    help: 'latency SLO: a completed request counts as goodput only if its first token came within this (and its mean inter-token gap within --slo-itl-ms); the summary adds good requests and goodput per second',
  },
  sloItlMs: {
    flag: '--slo-itl-ms <ms>',
    env: 'DYN_LOAD_CLIENT_SLO_ITL_MS',
    defaultText: 'none',
    help: "latency SLO: the most a good request's mean inter-token gap may be; see --slo-ttft-ms",
  },
  stream: {
    flag: '--no-stream',
    env: 'DYN_LOAD_CLIENT_STREAM',
    default: true,
    defaultText: 'on: requests stream',
    help: 'send stream=false (only TTFT is measured, as time to the complete answer); its env twin takes true or false',
  },
  priority: {
    flag: '--priority <n>',
    env: 'DYN_LOAD_CLIENT_PRIORITY',
    defaultText: 'none sent',
    help: `every request's priority, an int32 (lower runs sooner): the ${PRIORITY_HEADER} header (--openai) or gRPC metadata`,
  },
  tenant: {
    flag: '--tenant <id>',
    env: 'DYN_LOAD_CLIENT_TENANT',
    defaultText: 'none sent',
    help: `every request's tenant, 1-256 visible ASCII characters: the ${TENANT_HEADER} header (--openai) or gRPC metadata`,
  },
  json: { flag: '--json', env: 'DYN_LOAD_CLIENT_JSON', default: false, help: 'print the summary as one JSON object on stdout' },
  quiet: { flag: '--quiet', env: 'DYN_LOAD_CLIENT_QUIET', default: false, help: 'no live progress' },
} as const satisfies Readonly<Record<string, OptionSpec>>;

export type LoadOptionKey = keyof typeof LOAD_OPTIONS;

export const DEFAULT_LOAD_OPTIONS: Omit<LoadOptions, 'target' | 'openai'> = Object.freeze({
  model: undefined,
  api: LOAD_OPTIONS.api.default,
  overloadStatuses: LOAD_OPTIONS.overloadStatus.default,
  concurrency: undefined,
  rate: undefined,
  arrival: LOAD_OPTIONS.arrival.default,
  lengthDistribution: LOAD_OPTIONS.lengthDistribution.default,
  promptTokens: LOAD_OPTIONS.promptTokens.default,
  maxTokens: LOAD_OPTIONS.maxTokens.default,
  durationS: undefined,
  count: undefined,
  seed: LOAD_OPTIONS.seed.default,
  deadlineMs: undefined,
  retry: LOAD_OPTIONS.retry.default,
  // Library-only knobs (no flag): the first backoff, and how often runLoad reports progress.
  retryBaseMs: 50,
  retryMaxMs: LOAD_OPTIONS.retryMaxMs.default,
  stream: LOAD_OPTIONS.stream.default,
  graceS: LOAD_OPTIONS.graceS.default,
  sloTtftMs: undefined,
  sloItlMs: undefined,
  progressIntervalMs: 1000,
  priority: undefined,
  tenant: undefined,
});

/** Used when neither a duration nor a count is given. */
export const DEFAULT_DURATION_S: number = LOAD_OPTIONS.durationS.default;
/** Used when neither a concurrency nor a rate is given. */
export const DEFAULT_CONCURRENCY: number = LOAD_OPTIONS.concurrency.default;

/** The flag of an option (`--retry-max-ms`): what errors name when a library caller passed the value. */
const flagOf = (key: LoadOptionKey): string => LOAD_OPTIONS[key].flag.replace(/ .*/, '');

/** Where each value came from, for problems: its flag, or the env twin it was read from. */
export type LoadOptionSources = Partial<Record<LoadOptionKey, string>>;

const isInt = (v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): v is number => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
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

/** The settings that apply only with --openai. */
export const ONLY_WITH_OPENAI = ['model', 'api', 'overloadStatus'] as const;

const sameStatuses = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((c, i) => c === b[i]);

export function resolveLoadOptions(input: Partial<LoadOptions>): LoadOptions {
  const problems = new Problems();
  const options = resolveFrom(input, {}, problems);
  problems.check('ERR_LOAD_CONFIG');
  // check() has thrown unless resolve built them.
  return options as LoadOptions;
}

/** The resolved options, or undefined with every problem reported, each naming the value's source. */
export function resolveFrom(input: Partial<LoadOptions>, sources: LoadOptionSources, problems: Problems): LoadOptions | undefined {
  const o = { ...DEFAULT_LOAD_OPTIONS, ...Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) } as LoadOptions;
  const source = (key: LoadOptionKey): string => sources[key] ?? flagOf(key);
  const bad = (flag: string, message: string, got: unknown): void => problems.report(flag, `: ${message}, got ${JSON.stringify(got)}`);
  let openai = o.openai;
  if (o.target !== undefined && o.openai !== undefined) {
    problems.report(source('openai'), `: cannot be combined with ${source('target')}: drive either a gRPC target or an OpenAI-compatible HTTP server`);
  } else if (o.target === undefined && o.openai === undefined) {
    problems.report(source('target'), ': is required (HOST:PORT of the engine or sidecar), or --openai URL of an OpenAI-compatible server');
  }
  if (o.target !== undefined && typeof parseHostPort(String(o.target), false) === 'string') bad(source('target'), 'must be HOST:PORT', o.target);
  if (o.openai !== undefined) {
    const base = openAiBaseUrl(String(o.openai));
    if (typeof base === 'string') openai = base;
    else bad(source('openai'), base.problem, redactUrlCredentials(String(o.openai)));
  } else {
    // Values other than the defaults (resolving resolved options again must pass); the CLI
    // also refuses the flags given with their default values.
    if (o.model !== undefined) problems.report(source('model'), ': applies only with --openai');
    if (o.api !== DEFAULT_LOAD_OPTIONS.api) problems.report(source('api'), ': applies only with --openai');
    if (!Array.isArray(o.overloadStatuses) || !sameStatuses(o.overloadStatuses, DEFAULT_LOAD_OPTIONS.overloadStatuses)) {
      problems.report(source('overloadStatus'), ': applies only with --openai');
    }
  }
  if (o.model !== undefined && (typeof o.model !== 'string' || o.model.trim() === '')) bad(source('model'), 'must be a non-empty name', o.model);
  if (o.api !== 'chat' && o.api !== 'completions') bad(source('api'), "must be 'chat' or 'completions'", o.api);
  if (!Array.isArray(o.overloadStatuses) || o.overloadStatuses.length === 0 || !o.overloadStatuses.every((c) => isInt(c, 400, 599))) {
    bad(source('overloadStatus'), 'must be HTTP status codes from 400 to 599', o.overloadStatuses);
  }
  if (o.concurrency !== undefined && o.rate !== undefined) {
    problems.report(source('rate'), `: cannot be combined with ${source('concurrency')}: choose a closed (concurrency) or open (rate) loop`);
  }
  if (o.concurrency !== undefined && !isInt(o.concurrency, 1, 100_000)) bad(source('concurrency'), 'must be an integer from 1 to 100000', o.concurrency);
  if (o.rate !== undefined && !(isPositive(o.rate) && o.rate <= 1e6)) bad(source('rate'), 'must be a number > 0 and <= 1000000', o.rate);
  if (o.arrival !== 'poisson' && o.arrival !== 'fixed') bad(source('arrival'), "must be 'poisson' or 'fixed'", o.arrival);
  if (o.lengthDistribution !== 'uniform' && o.lengthDistribution !== 'lognormal')
    bad(source('lengthDistribution'), "must be 'uniform' or 'lognormal'", o.lengthDistribution);
  for (const [key, range, min] of [
    ['promptTokens', o.promptTokens, 1],
    ['maxTokens', o.maxTokens, 1],
  ] as const) {
    if (!isInt(range?.min, min, 0xffff_ffff) || !isInt(range?.max, range.min, 0xffff_ffff)) {
      bad(source(key), `must be an integer >= ${min} or a range MIN-MAX with MIN <= MAX`, range);
    }
  }
  if (o.durationS !== undefined && !isPositive(o.durationS)) bad(source('durationS'), 'must be a number > 0', o.durationS);
  if (o.count !== undefined && !isInt(o.count, 1)) bad(source('count'), 'must be an integer >= 1', o.count);
  if (!isInt(o.seed, 0, 0xffff_ffff)) bad(source('seed'), 'must be an integer from 0 to 4294967295', o.seed);
  if (o.deadlineMs !== undefined && !isPositive(o.deadlineMs)) bad(source('deadlineMs'), 'must be a number > 0', o.deadlineMs);
  if (!isInt(o.retry, 0, 100)) bad(source('retry'), 'must be an integer from 0 to 100', o.retry);
  if (!isPositive(o.retryBaseMs)) bad('retryBaseMs', 'must be > 0', o.retryBaseMs);
  else if (!isPositive(o.retryMaxMs) || o.retryMaxMs < o.retryBaseMs)
    bad(source('retryMaxMs'), `must be a number >= ${o.retryBaseMs} (the first backoff)`, o.retryMaxMs);
  if (typeof o.graceS !== 'number' || !(o.graceS >= 0)) bad(source('graceS'), 'must be a number >= 0', o.graceS);
  for (const key of ['sloTtftMs', 'sloItlMs'] as const) if (o[key] !== undefined && !isPositive(o[key])) bad(source(key), 'must be a number > 0', o[key]);
  if (o.priority !== undefined && (typeof o.priority !== 'number' || typeof checkPriority(o.priority) !== 'number')) {
    bad(source('priority'), `must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}`, o.priority);
  }
  if (o.tenant !== undefined) {
    const checked = typeof o.tenant === 'string' ? checkTenant(o.tenant) : { problem: 'tenant must be a string' };
    // The shared check's words without its own "got" (bad adds it) and without repeating the name.
    if (typeof checked !== 'string') bad(source('tenant'), checked.problem.replace(/^tenant /u, '').replace(/, got .*$/u, ''), o.tenant);
  }
  if (!isPositive(o.progressIntervalMs)) bad('progressIntervalMs', 'must be > 0', o.progressIntervalMs);
  if (problems.problems.length > 0) return undefined;
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
