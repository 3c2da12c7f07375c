import { ConfigError } from '../../src/platform/config/config-error.js';
import { parseSidecarConfig } from '../../src/sidecar/config/sidecar-config.js';

/** The problems a config parser reports (none: []); rethrows anything that is not a ConfigError. */
export function problemsOf(parse: () => unknown): readonly string[] {
  try {
    parse();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

/** The problems parseSidecarConfig reports for these flags and environment (none: []). */
export function problems(flags: Record<string, string>, env: Record<string, string> = {}): readonly string[] {
  return problemsOf(() => parseSidecarConfig(flags, env));
}
