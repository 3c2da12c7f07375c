/**
 * One option of a command: flag, environment twin, default and help text. Every command keeps
 * its options in one table of these, builds its commander options and its --help from it, and
 * reads values with the OptionReader, so a flag cannot exist without its env twin or help line.
 */

export interface OptionSpec {
  /** Commander flag, e.g. `--engine-request-limit <n>`. Absent for env-only knobs. */
  readonly flag?: string;
  /** Environment twin; the flag wins when both are set. */
  readonly env: string;
  readonly help: string;
  /** Default shown in --help; the typed default lives in the parser. */
  readonly defaultText?: string;
}

/** One option's --help text: its help, env twin and default. */
export function describeOption(spec: OptionSpec): string {
  const parts = [`env ${spec.env}`];
  if (spec.defaultText !== undefined) parts.push(`default ${spec.defaultText}`);
  return `${spec.help} (${parts.join('; ')})`;
}

/** The --help lines of a table's env-only settings (those without a flag). */
export function envOnlyHelp(specs: Readonly<Record<string, OptionSpec>>): string {
  return Object.values(specs)
    .filter((spec) => !spec.flag)
    .map((spec) => `  ${spec.env}  ${spec.help}${spec.defaultText ? ` (default ${spec.defaultText})` : ''}`)
    .join('\n');
}
