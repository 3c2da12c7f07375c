/**
 * One check per option of a command's table: the default its --help shows is the value its
 * parser gives when neither the flag nor the env twin is set.
 */
import { expect } from 'vitest';
import { describeOption, formatDefault, type OptionDefault, type OptionSpec } from '../../src/platform/config/option-spec.js';

/** The default an option's --help text shows (`... (env X; default Y)`), if any. */
export function shownDefault(spec: OptionSpec): string | undefined {
  const match = / \(env \S+(?:; default (.*))?\)$/s.exec(describeOption(spec));
  expect(match, `--help text of ${spec.env} ends with its env twin`).not.toBeNull();
  return match![1];
}

/**
 * A typed default: the parser gives it and --help shows it written out (alone, or followed by a
 * word of explanation: `0 (none)`, `1 when --rate is not given`). No typed default: the parser
 * gives nothing (undefined, null or an empty list) and --help at most describes what happens
 * at run time.
 */
export function expectShownDefaultParsed(spec: OptionSpec, parsed: unknown): void {
  const shown = shownDefault(spec);
  if (spec.default === undefined) {
    const nothing = parsed === undefined || parsed === null || (Array.isArray(parsed) && parsed.length === 0);
    expect(nothing, `${spec.env} has no typed default, so unset it parses to nothing, got ${JSON.stringify(parsed)}`).toBe(true);
    return;
  }
  expect(parsed).toEqual(spec.default);
  const written = formatDefault(parsed as OptionDefault);
  expect(shown, `${spec.env}'s --help default`).toBeDefined();
  expect(
    shown === written || shown!.startsWith(`${written} `) || shown!.startsWith(`${written}:`),
    `--help shows "${shown}", the parser gives ${written}`,
  ).toBe(true);
}
