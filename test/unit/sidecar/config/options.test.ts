/** The sidecar's option table: every --help default is what parseSidecarConfig gives when the option is unset. */
import { describe, expect, it } from 'vitest';
import { SIDECAR_OPTIONS, type SidecarOptionKey } from '../../../../src/sidecar/config/options.js';
import { parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { expectShownDefaultParsed } from '../../../support/option-defaults.js';

/** Where an option lands in the config when its name there differs. */
const RENAMED: Partial<Record<SidecarOptionKey, string>> = { natsUrl: 'natsServers' };

function parsedValue(key: SidecarOptionKey): unknown {
  const config = parseSidecarConfig({}, {});
  const name = RENAMED[key] ?? key;
  for (const part of [config, config.connections, config.load] as object[]) {
    if (name in part) return (part as Record<string, unknown>)[name];
  }
  throw new Error(`option ${key} is not in the parsed config`);
}

describe('sidecar option table', () => {
  it.each(Object.keys(SIDECAR_OPTIONS) as SidecarOptionKey[])('%s: --help shows the default the parser gives when unset', (key) => {
    expectShownDefaultParsed(SIDECAR_OPTIONS[key], parsedValue(key));
  });

  it('every option has an env twin of its own', () => {
    const envs = Object.values(SIDECAR_OPTIONS).map((spec) => spec.env);
    expect(new Set(envs).size).toBe(envs.length);
  });
});
