import { ConfigError } from '../../src/config/config-error.js';
import { parseSidecarConfig } from '../../src/config/sidecar-config.js';

/** The problems parseSidecarConfig reports for these flags and environment (none: []). */
export function problems(flags: Record<string, string>, env: Record<string, string> = {}): readonly string[] {
  try {
    parseSidecarConfig(flags, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}
