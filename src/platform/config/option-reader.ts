/**
 * Reads a command's option values, flag over environment (over a config file's values, when one
 * is given), into typed values, collecting every problem (each naming the flag or variable it
 * came from) with `report` so a command reports them all at once: `check(code)` throws one
 * ConfigError (config-error.ts). Sources are injected, so tests need no real environment. An
 * empty environment variable counts as unset, as compose files use `VAR=` to clear one.
 *
 * An unset option (or one whose value is refused) reads as its table entry's `default`, so the
 * default that --help shows is the one the parser gives; without a `default` it reads as
 * `undefined` (a switch: false).
 */
import { Problems } from './config-error.js';
import { parseHostPort, type HostPort } from './host-port.js';
import type { OptionSpec } from './option-spec.js';

export type Env = Readonly<Record<string, string | undefined>>;

type Specs = Readonly<Record<string, OptionSpec>>;
type Key<S extends Specs> = keyof S & string;
/** The type of a table entry's `default`, or `undefined` when it has none. */
export type DefaultOf<S extends Specs, K extends keyof S> = S[K] extends { readonly default: infer D } ? D : undefined;

/** Values by environment-variable name from a third, lowest source (a config file), and how a problem names one. */
export interface FallbackValues {
  readonly values: Env;
  /** e.g. `DYN_ENGINE_REQUEST_LIMIT (line 3 of /etc/sidecar.env)`. */
  source(name: string): string;
}

/** Reads option values with flag-over-env(-over-fallback) precedence and names the source in every problem. */
export class OptionReader<S extends Specs> extends Problems {
  constructor(
    private readonly flags: Readonly<Record<string, string | boolean | undefined>>,
    private readonly env: Env,
    private readonly specs: S,
    private readonly fallback?: FallbackValues,
  ) {
    super();
  }

  /** The raw value and a label such as `--engine-request-limit`, `DYN_ENGINE_REQUEST_LIMIT` or the fallback's label. */
  raw(key: Key<S>): { value: string; source: string } | undefined {
    const spec: OptionSpec | undefined = this.specs[key];
    if (spec === undefined) return undefined;
    const flagValue = this.flags[key];
    if (flagValue !== undefined && flagValue !== false && spec.flag) return { value: String(flagValue), source: spec.flag.replace(/ .*/, '') };
    const envValue = this.env[spec.env];
    if (envValue !== undefined && envValue.trim() !== '') return { value: envValue, source: spec.env };
    const fileValue = this.fallback?.values[spec.env];
    if (fileValue !== undefined && fileValue.trim() !== '') return { value: fileValue, source: this.fallback!.source(spec.env) };
    return undefined;
  }

  /** How a message names an option whatever its source: `--tls-key or DYN_SIDECAR_TLS_KEY` (the variable alone without a flag). */
  names(key: Key<S>): string {
    const spec: OptionSpec | undefined = this.specs[key];
    if (spec === undefined) return key;
    return spec.flag ? `${spec.flag.replace(/ .*/, '')} or ${spec.env}` : spec.env;
  }

  /** The table entry's default (`undefined` when it has none). */
  defaultOf<K extends Key<S>>(key: K): DefaultOf<S, K> {
    const spec: OptionSpec | undefined = this.specs[key];
    return spec?.default as DefaultOf<S, K>;
  }

  /** Integer in [min, max]; plain decimal digits only, so "1.5", "1e3", "0x10" and "-3" are refused. */
  integer<K extends Key<S>>(key: K, min: number, max: number): number | DefaultOf<S, K> {
    const fallback = this.defaultOf(key);
    const found = this.raw(key);
    if (!found) return fallback;
    const text = found.value.trim();
    // A sign only where the range has negative values: elsewhere "-1" reads as the typo it is.
    const value = (min < 0 ? /^[+-]?\d+$/ : /^\d+$/).test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in ${min}..${max}`;
      this.report(found.source, `must be ${range}, got "${found.value}"`);
      return fallback;
    }
    return value;
  }

  hostPort<K extends Key<S>>(key: K, allowZero: boolean): HostPort | DefaultOf<S, K> {
    const fallback = this.defaultOf(key);
    const found = this.raw(key);
    if (!found) return fallback;
    const parsed = parseHostPort(found.value, allowZero);
    if (typeof parsed === 'string') {
      this.report(found.source, `: ${parsed}`);
      return fallback;
    }
    return parsed;
  }

  choice<T extends string, K extends Key<S>>(key: K, choices: readonly T[]): T | DefaultOf<S, K> {
    const fallback = this.defaultOf(key);
    const found = this.raw(key);
    if (!found) return fallback;
    if ((choices as readonly string[]).includes(found.value)) return found.value as T;
    this.report(found.source, `must be one of ${choices.join(', ')}, got "${found.value}"`);
    return fallback;
  }

  /** A switch: the bare flag, or the env set to true/false/1/0/yes/no; unset: its default, else false. */
  boolean(key: Key<S>): boolean {
    const fallback = this.defaultOf(key) === true;
    const found = this.raw(key);
    if (!found) return fallback;
    const value = parseSwitch(found.value);
    if (value !== undefined) return value;
    this.report(found.source, `must be true or false, got "${found.value}"`);
    return fallback;
  }

  /** An absolute URL with one of the given protocols (e.g. "http:"). */
  url(key: Key<S>, protocols: readonly string[]): string | undefined {
    const found = this.raw(key);
    if (!found) return undefined;
    let url: URL | undefined;
    try {
      url = new URL(found.value.trim());
    } catch {
      url = undefined;
    }
    if (!url || !protocols.includes(url.protocol)) {
      this.report(found.source, `must be a ${protocols.map((p) => p.replace(':', '://')).join(' or ')} URL, got "${found.value}"`);
      return undefined;
    }
    return url.href;
  }

  string<K extends Key<S>>(key: K): string | DefaultOf<S, K> {
    const fallback = this.defaultOf(key);
    const found = this.raw(key);
    if (!found) return fallback;
    if (found.value.trim() === '') {
      this.report(found.source, `must not be empty`);
      return fallback;
    }
    return found.value.trim();
  }
}

/** A switch's text: true/1/yes/on or false/0/no/off, any case; `undefined` for anything else. */
export function parseSwitch(text: string): boolean | undefined {
  const word = text.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(word)) return true;
  if (['false', '0', 'no', 'off'].includes(word)) return false;
  return undefined;
}

/** NATS_SERVER as the nats clients take it: comma-separated nats://, tls://, ws(s):// URLs or host:port. */
export function parseNatsServers<S extends Specs & { readonly natsUrl: OptionSpec }>(read: OptionReader<S>): readonly string[] | undefined {
  const found = read.raw('natsUrl');
  if (!found) return undefined;
  const servers = found.value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = servers.filter((server) => {
    if (/^[^\s:/]+:\d{1,5}$/.test(server)) return false;
    try {
      return !['nats:', 'tls:', 'ws:', 'wss:'].includes(new URL(server).protocol);
    } catch {
      return true;
    }
  });
  if (servers.length === 0 || bad.length) {
    read.report(found.source, `must be nats://HOST:PORT (comma-separated for several), got "${found.value}"`);
    return undefined;
  }
  return Object.freeze(servers);
}
