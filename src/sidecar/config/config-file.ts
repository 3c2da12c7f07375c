/**
 * The sidecar's --config-file: read once at start-up (and again on SIGHUP), checked name by name
 * against the option table, so a mistyped setting in the file is a problem (with a suggestion),
 * not a value ignored in silence. Flags and the environment win over the file (sidecar-config.ts).
 */
import { parseEnvFile } from '../../platform/config/env-file.js';
import { findEnvTypos } from '../../platform/config/env-typos.js';
import { OptionError } from '../../platform/config/config-error.js';
import type { Env, OptionReader } from '../../platform/config/option-reader.js';
import type { OptionSpec } from '../../platform/config/option-spec.js';
import { SIDECAR_OPTIONS, type RawFlags, type SidecarOptionKey } from './options.js';

type Reader = OptionReader<typeof SIDECAR_OPTIONS>;

export interface ReadConfigFile {
  readonly path: string;
  readonly values: Readonly<Record<string, string>>;
  readonly lines: Readonly<Record<string, number>>;
  readonly problems: readonly OptionError[];
}

/** Reads and checks --config-file: every name must be one of the table's environment names, except the file's own. */
export function readConfigFile(read: Reader, readFile: (path: string) => string): ReadConfigFile | undefined {
  const found = read.raw('configFile');
  if (!found) return undefined;
  const path = found.value.trim();
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    return { path, values: {}, lines: {}, problems: [new OptionError(found.source, `: cannot read ${JSON.stringify(path)}: ${(err as Error).message}`)] };
  }
  const { file, problems } = parseEnvFile(text, path);
  const known = (Object.values(SIDECAR_OPTIONS) as OptionSpec[]).map((spec) => spec.env);
  for (const name of Object.keys(file.values)) {
    const where = `${path} line ${file.lines[name]}`;
    if (name === SIDECAR_OPTIONS.configFile.env) problems.push(new OptionError(where, `: ${name} cannot be set in the config file itself`));
    else if (!known.includes(name)) {
      const typo = findEnvTypos({ [name]: 'x' }, known)[0];
      problems.push(new OptionError(where, `: ${name} is not a setting of the sidecar${typo ? `; did you mean ${typo.suggestion}?` : ''}`));
    }
  }
  return { path, values: file.values, lines: file.lines, problems };
}

/** Settings the file decided: set (non-empty) there, by no flag, and by no non-empty variable. */
export function fromFile(read: Reader, flags: RawFlags, env: Env, values: Readonly<Record<string, string>>): SidecarOptionKey[] {
  return (Object.keys(SIDECAR_OPTIONS) as SidecarOptionKey[]).filter((key) => {
    const name = SIDECAR_OPTIONS[key].env;
    const set = (value: unknown): boolean => typeof value === 'string' && value.trim() !== '';
    return set(values[name]) && !set(env[name]) && (flags[key] === undefined || flags[key] === false) && read.raw(key) !== undefined;
  });
}
