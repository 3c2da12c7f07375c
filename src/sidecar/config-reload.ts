/**
 * SIGHUP: re-read --config-file and apply its live settings (LIVE_SETTINGS: engine request limit,
 * queue limit and timeout, retry pushback) as one change from source `sighup`, exactly as a
 * `PUT /admission` with those fields would; the last change wins, whichever way it came.
 *
 * - The file is parsed with the same flags and environment as at start-up, so the precedence is
 *   the same: a setting that a flag or variable gives is not the file's to change (logged).
 * - Only settings the file names are applied; one removed from the file keeps its value (logged:
 *   a restart would give the flag's, the variable's or the default).
 * - Any other setting that differs from the file read at start-up is logged as needing a
 *   restart, by name only (values may be secrets), and ignored.
 * - A file that does not parse, or a value out of range anywhere in it, changes nothing: every
 *   problem is logged and the settings in force stay.
 */
import { ConfigError } from '../platform/config/config-error.js';
import type { Env } from '../platform/config/option-reader.js';
import { redactUrlCredentials, type Logger } from '../platform/log.js';
import { ADMISSION_FIELDS, type AdmissionControl } from './admission/admission-control.js';
import { SIDECAR_OPTIONS, type RawFlags } from './config/options.js';
import { LIVE_SETTINGS, parseSidecarConfig, type AdmissionSettings, type LiveSettingKey, type SidecarConfig } from './config/sidecar-config.js';

export interface ConfigReloadDeps {
  readonly flags: RawFlags;
  readonly env: Env;
  /** The config the sidecar started with: its file's values are what "needs a restart" compares with. */
  readonly startup: SidecarConfig;
  readonly control: Pick<AdmissionControl, 'change'>;
  readonly logger: Logger;
  /** Injected in tests; the real file system otherwise. */
  readonly readFile?: (path: string) => string;
}

type ReloadOutcome =
  | { readonly kind: 'no_file' }
  | { readonly kind: 'refused'; readonly problems: readonly string[] }
  | { readonly kind: 'applied'; readonly changed: readonly LiveSettingKey[]; readonly needsRestart: readonly string[] };

const LIVE_KEYS = Object.keys(LIVE_SETTINGS) as LiveSettingKey[];
const LIVE_NAMES: ReadonlySet<string> = new Set(LIVE_KEYS.map((key) => SIDECAR_OPTIONS[key].env));

export function reloadConfigFile(deps: ConfigReloadDeps): ReloadOutcome {
  const { startup, logger } = deps;
  if (!startup.configFile) {
    logger.info('SIGHUP: nothing to re-read (no --config-file); settings unchanged');
    return { kind: 'no_file' };
  }
  const path = startup.configFile.path;
  let next: SidecarConfig;
  try {
    next = parseSidecarConfig(deps.flags, deps.env, deps.readFile);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const problems = err.problems.map(redactUrlCredentials);
    logger.error('SIGHUP: config file not applied, settings unchanged', { path, problems });
    return { kind: 'refused', problems };
  }
  const before = startup.configFile.values;
  const after = next.configFile?.values ?? {};
  const needsRestart = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((name) => !LIVE_NAMES.has(name) && (before[name] ?? '').trim() !== (after[name] ?? '').trim())
    .sort();
  if (needsRestart.length) logger.warn('SIGHUP: config file changes settings that need a restart; ignored', { path, settings: needsRestart });

  const fromFile = new Set(next.configFile?.fromFile ?? []);
  const change: Partial<Record<LiveSettingKey, unknown>> = {};
  const overridden: string[] = [];
  const notInFile: string[] = [];
  for (const key of LIVE_KEYS) {
    const name = SIDECAR_OPTIONS[key].env;
    // auto is the engine's number, already applied (or the fallback until it answers): re-reading it changes nothing.
    if (key === 'engineRequestLimit' && next.engineRequestLimitAuto) continue;
    if (fromFile.has(key)) change[key] = next[key];
    else if ((after[name] ?? '').trim() !== '') overridden.push(name);
    else if ((before[name] ?? '').trim() !== '') notInFile.push(name);
  }
  if (overridden.length) logger.info('SIGHUP: config file settings given by a flag or variable too; the flag or variable wins', { path, settings: overridden });
  if (notInFile.length) logger.info('SIGHUP: settings no longer in the config file keep their current value until a restart', { path, settings: notInFile });
  const outcome = deps.control.change(change as Partial<AdmissionSettings>, 'sighup');
  if ('problem' in outcome) {
    logger.error('SIGHUP: config file not applied, settings unchanged', { path, problems: [outcome.problem] });
    return { kind: 'refused', problems: [outcome.problem] };
  }
  logger.info('SIGHUP: config file re-read', { path, changed: outcome.changed.map((key) => ADMISSION_FIELDS[key]) });
  return { kind: 'applied', changed: outcome.changed, needsRestart };
}
