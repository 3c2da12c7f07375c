/**
 * One option of a command: flag, environment twin, default and help text. Every command keeps
 * its options in one table of these, builds its commander options and its --help from it, and
 * reads values with the OptionReader, so a flag cannot exist without its env twin or help line,
 * and the default in --help is the value the parser gives (both come from `default`).
 */
import { formatHostPort, type HostPort } from './host-port.js';

/** A typed default: a number, name, switch, `HOST:PORT`, integer range, or list of numbers. */
export type OptionDefault = number | string | boolean | HostPort | { readonly min: number; readonly max: number } | readonly number[];

export interface OptionSpec {
  /** Commander flag, e.g. `--engine-request-limit <n>`. Absent for env-only knobs. */
  readonly flag?: string;
  /** Environment twin; the flag wins when both are set. */
  readonly env: string;
  readonly help: string;
  /**
   * The value the parser gives when neither flag nor env is set, and the one --help shows.
   * Absent: unset means off, or a value decided at run time that `defaultText` describes.
   */
  readonly default?: OptionDefault;
  /**
   * Default shown in --help instead of `default` written out: for a default decided at run time,
   * or one that needs a word of explanation (then it starts with `default` written out).
   */
  readonly defaultText?: string;
}

/** A typed default as --help writes it: `250`, `info`, `off`, `0.0.0.0:50050`, `64-256`, `529,503`. */
export function formatDefault(value: OptionDefault): string {
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  if (typeof value === 'number' || typeof value === 'string') return String(value);
  if (Array.isArray(value)) return value.join(',');
  if ('host' in value) return formatHostPort(value);
  const range = value as { readonly min: number; readonly max: number };
  return range.min === range.max ? String(range.min) : `${range.min}-${range.max}`;
}

/** The default --help shows for this option, if any. */
export function helpDefault(spec: OptionSpec): string | undefined {
  return spec.defaultText ?? (spec.default === undefined ? undefined : formatDefault(spec.default));
}

/** One option's --help text: its help, env twin and default. */
export function describeOption(spec: OptionSpec): string {
  const parts = [`env ${spec.env}`];
  const shown = helpDefault(spec);
  if (shown !== undefined) parts.push(`default ${shown}`);
  return `${spec.help} (${parts.join('; ')})`;
}

/** The --help lines of a table's env-only settings (those without a flag). */
export function envOnlyHelp(specs: Readonly<Record<string, OptionSpec>>): string {
  return Object.values(specs)
    .filter((spec) => !spec.flag)
    .map((spec) => {
      const shown = helpDefault(spec);
      return `  ${spec.env}  ${spec.help}${shown ? ` (default ${shown})` : ''}`;
    })
    .join('\n');
}
