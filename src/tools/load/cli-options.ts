/**
 * The load command's strings: flags over their DYN_LOAD_CLIENT_* twins, read with the
 * OptionReader and parsed strictly (Number("") and "1e3abc" are refused, unlike parseInt), then
 * resolved like a library caller's options (options.ts), so both report the same problems.
 */
import { Problems } from '../../platform/config/config-error.js';
import { OptionReader, parseSwitch, type Env } from '../../platform/config/option-reader.js';
import { parsePriority } from '../../protocol/request-class.js';
import {
  HTTP_OVERLOADED,
  LOAD_OPTIONS,
  ONLY_WITH_OPENAI,
  resolveFrom,
  type IntRange,
  type LoadOptionKey,
  type LoadOptionSources,
  type LoadOptions,
} from './options.js';

/** "128" or "64-256" (inclusive). Returns undefined for anything else. */
export function parseIntRange(text: string): IntRange | undefined {
  const match = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(text);
  if (!match) return undefined;
  const min = Number(match[1]);
  return { min, max: match[2] === undefined ? min : Number(match[2]) };
}

/** What commander hands the action, keyed like the table; a missing key is unset. */
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
  lengthDistribution?: string;
  promptTokens?: string;
  maxTokens?: string;
  durationS?: string;
  count?: string;
  seed?: string;
  deadlineMs?: string;
  retry?: string;
  graceS?: string;
  sloTtftMs?: string;
  sloItlMs?: string;
  priority?: string;
  tenant?: string;
  /** false: --no-stream (commander sets true when it is absent). */
  stream?: boolean;
  json?: boolean;
  quiet?: boolean;
}

/** The load command's settings: the run's options and how its summary and progress are shown. */
export interface LoadCommandSettings {
  readonly options: LoadOptions;
  readonly json: boolean;
  readonly quiet: boolean;
}

const NUMBER_KEYS = ['concurrency', 'rate', 'durationS', 'count', 'seed', 'deadlineMs', 'retry', 'retryMaxMs', 'graceS', 'sloTtftMs', 'sloItlMs'] as const;
const STRING_KEYS = ['arrival', 'lengthDistribution', 'target', 'openai', 'model', 'api', 'tenant'] as const;

/**
 * Reads flags over their DYN_LOAD_CLIENT_* twins with the OptionReader, parses the strings
 * strictly, then resolves; throws ConfigError naming every bad flag or variable.
 */
export function loadSettingsFromCli(values: LoadCliValues, env: Env = {}): LoadCommandSettings {
  const { overloadStatus, stream, ...scalars } = values;
  const flags = {
    ...scalars,
    overloadStatus: overloadStatus === undefined ? undefined : [overloadStatus].flat().join(','),
    // Commander reports the absent --no-stream as stream=true; only the flag given means anything.
    stream: stream === false ? 'false' : undefined,
  };
  const read = new OptionReader(flags, env, LOAD_OPTIONS);
  const sources: LoadOptionSources = {};
  const found = (key: LoadOptionKey): { value: string; source: string } | undefined => {
    const raw = read.raw(key);
    if (raw !== undefined) sources[key] = raw.source;
    return raw;
  };
  const out: Record<string, unknown> = {};
  for (const key of STRING_KEYS) out[key] = found(key)?.value;
  const openaiGiven = out['openai'] !== undefined;
  if (!openaiGiven) {
    for (const key of ONLY_WITH_OPENAI) {
      const given = found(key);
      if (given !== undefined) read.report(given.source, ': applies only with --openai');
    }
    // Refused above; not passed on, so they are not reported twice.
    out['model'] = undefined;
    out['api'] = undefined;
  } else {
    const statuses = found('overloadStatus');
    if (statuses !== undefined) {
      const codes = statuses.value.split(',').map((c) => (/^\s*\d{3}\s*$/.test(c) ? Number(c) : Number.NaN));
      if (codes.some(Number.isNaN))
        read.report(statuses.source, `: must be HTTP status codes such as 503 (comma-separated or repeated), got '${statuses.value}'`);
      else out['overloadStatuses'] = [HTTP_OVERLOADED, ...codes];
    }
  }
  for (const key of NUMBER_KEYS) {
    const given = found(key);
    if (given === undefined) continue;
    const value = given.value.trim() === '' ? Number.NaN : Number(given.value);
    if (Number.isNaN(value)) read.report(given.source, `: must be a number, got '${given.value}'`);
    else out[key] = value;
  }
  // Parsed as the sidecar parses the header it becomes: a decimal int32, sign allowed.
  const priority = found('priority');
  if (priority !== undefined) {
    const parsed = parsePriority(priority.value);
    if (typeof parsed === 'number') out['priority'] = parsed;
    else read.report(priority.source, `: must be an integer from -2147483648 to 2147483647, got '${priority.value}'`);
  }
  for (const key of ['promptTokens', 'maxTokens'] as const) {
    const given = found(key);
    if (given === undefined) continue;
    const range = parseIntRange(given.value);
    if (range === undefined) read.report(given.source, `: must be an integer N or a range MIN-MAX, got '${given.value}'`);
    else out[key] = range;
  }
  const switches = { stream: true, json: false, quiet: false };
  for (const key of ['stream', 'json', 'quiet'] as const) {
    const given = found(key);
    const value = given === undefined ? read.defaultOf(key) : parseSwitch(given.value);
    if (value === undefined) read.report(given!.source, `: must be true or false, got '${given!.value}'`);
    else switches[key] = value;
  }
  out['stream'] = switches.stream;
  const resolved = new Problems();
  const options = resolveFrom(out, sources, resolved);
  // A value already refused as unparsable is not reported again for its (absent) value.
  const reported = new Set(read.errors.map((e) => e.flag));
  read.reportAll(resolved.errors.filter((e) => !reported.has(e.flag)));
  read.check('ERR_LOAD_CONFIG');
  // check() has thrown unless resolve built them.
  return { options: options as LoadOptions, json: switches.json, quiet: switches.quiet };
}
