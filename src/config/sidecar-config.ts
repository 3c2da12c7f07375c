/**
 * Parses flags and environment into one typed, frozen SidecarConfig, collecting every problem
 * before failing (ConfigError). Sources are injected so tests need no real environment.
 * An empty environment variable counts as unset, as compose files use `VAR=` to clear one.
 */
import type { LogLevel } from '../log.js';
import { ConfigError } from './config-error.js';
import { parseHostPort, type HostPort } from './host-port.js';
import { SIDECAR_OPTIONS, type RawFlags, type SidecarOptionKey } from './options.js';

export interface SidecarConfig {
  readonly listen: HostPort;
  /** `undefined`: start the embedded simulated engine (demo mode). */
  readonly upstream: HostPort | undefined;
  readonly systemHost: string;
  readonly systemPort: number;
  /** `undefined`: admission off. */
  readonly engineRequestLimit: number | undefined;
  readonly requestQueueLimit: number;
  readonly retryPushbackMs: number;
  readonly drainGraceMs: number;
  readonly logLevel: LogLevel;
}

export type Env = Readonly<Record<string, string | undefined>>;

export const DEFAULT_LISTEN: HostPort = { host: '0.0.0.0', port: 50050 };
export const DEFAULT_SYSTEM_PORT = 9090;
export const DEFAULT_REQUEST_QUEUE_LIMIT = 16;
export const MIN_REQUEST_QUEUE_LIMIT = 2;
export const DEFAULT_RETRY_PUSHBACK_MS = 250;
export const DEFAULT_DRAIN_GRACE_MS = 30_000;
const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** Reads option values with flag-over-env precedence and names the source in every problem. */
export class OptionReader {
  readonly problems: string[] = [];

  constructor(
    private readonly flags: Readonly<Record<string, string | undefined>>,
    private readonly env: Env,
    private readonly specs: Readonly<Record<string, { flag?: string; env: string }>>,
  ) {}

  /** The raw value and a label such as `--engine-request-limit` or `DYN_ENGINE_REQUEST_LIMIT`. */
  raw(key: string): { value: string; source: string } | undefined {
    const spec = this.specs[key]!;
    const flagValue = this.flags[key];
    if (flagValue !== undefined && spec.flag) return { value: flagValue, source: spec.flag.split(' ')[0]! };
    const envValue = this.env[spec.env];
    if (envValue !== undefined && envValue.trim() !== '') return { value: envValue, source: spec.env };
    return undefined;
  }

  /** Integer in [min, max]; plain decimal digits only, so "1.5", "1e3", "0x10" and "-3" are refused. */
  integer(key: string, min: number, max: number, fallback: number): number;
  integer(key: string, min: number, max: number, fallback: undefined): number | undefined;
  integer(key: string, min: number, max: number, fallback: number | undefined): number | undefined {
    const found = this.raw(key);
    if (!found) return fallback;
    const text = found.value.trim();
    const value = /^\d+$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in ${min}..${max}`;
      this.problems.push(`${found.source} must be ${range}, got "${found.value}"`);
      return fallback;
    }
    return value;
  }

  hostPort(key: string, allowZero: boolean, fallback: HostPort): HostPort;
  hostPort(key: string, allowZero: boolean, fallback: undefined): HostPort | undefined;
  hostPort(key: string, allowZero: boolean, fallback: HostPort | undefined): HostPort | undefined {
    const found = this.raw(key);
    if (!found) return fallback;
    const parsed = parseHostPort(found.value, allowZero);
    if (typeof parsed === 'string') {
      this.problems.push(`${found.source}: ${parsed}`);
      return fallback;
    }
    return parsed;
  }

  choice<T extends string>(key: string, choices: readonly T[], fallback: T): T {
    const found = this.raw(key);
    if (!found) return fallback;
    if ((choices as readonly string[]).includes(found.value)) return found.value as T;
    this.problems.push(`${found.source} must be one of ${choices.join(', ')}, got "${found.value}"`);
    return fallback;
  }

  string(key: string, fallback: string): string {
    const found = this.raw(key);
    if (!found) return fallback;
    if (found.value.trim() === '') {
      this.problems.push(`${found.source} must not be empty`);
      return fallback;
    }
    return found.value.trim();
  }

  /** Throws ConfigError with every problem seen so far. */
  check(): void {
    if (this.problems.length) throw new ConfigError(this.problems);
  }
}

export function parseSidecarConfig(flags: RawFlags, env: Env): SidecarConfig {
  const read = new OptionReader(flags, env, SIDECAR_OPTIONS);
  const key = (k: SidecarOptionKey): string => k;
  const engineRequestLimit = read.integer(key('engineRequestLimit'), 1, Number.MAX_SAFE_INTEGER, undefined);
  const config: SidecarConfig = {
    listen: read.hostPort(key('listen'), true, DEFAULT_LISTEN),
    upstream: read.hostPort(key('upstream'), false, undefined),
    systemHost: read.string(key('systemHost'), '0.0.0.0'),
    systemPort: read.integer(key('systemPort'), 0, 65535, DEFAULT_SYSTEM_PORT),
    engineRequestLimit,
    // Validated even when no limit is set: a typo should not wait for the day the limit is turned on.
    requestQueueLimit: read.integer(key('requestQueueLimit'), MIN_REQUEST_QUEUE_LIMIT, Number.MAX_SAFE_INTEGER, DEFAULT_REQUEST_QUEUE_LIMIT),
    retryPushbackMs: read.integer(key('retryPushbackMs'), 0, 3_600_000, DEFAULT_RETRY_PUSHBACK_MS),
    drainGraceMs: read.integer(key('drainGraceMs'), 0, 3_600_000, DEFAULT_DRAIN_GRACE_MS),
    logLevel: read.choice(key('logLevel'), LOG_LEVELS, 'info'),
  };
  read.check();
  return Object.freeze(config);
}
