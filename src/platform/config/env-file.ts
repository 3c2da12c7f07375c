/**
 * A settings file of environment-variable lines, as a command's `--config-file` reads it:
 *
 *   # comment lines and blank lines are skipped
 *   DYN_ENGINE_REQUEST_LIMIT=32
 *   DYN_SIDECAR_RETRY_PUSHBACK_MODE = adaptive
 *   DYN_SIDECAR_ADMIN_TOKEN="3f1c...e9"
 *
 * One `NAME=VALUE` per line; whitespace around the name and the value is dropped, and one pair
 * of matching quotes around the value too. A `#` only starts a comment at the beginning of a
 * line (a value may contain one). Names are environment-variable names; a name given twice is a
 * problem, not a silent "last wins". Values are never quoted in problems (a file may hold secrets).
 */
import { OptionError } from './config-error.js';

export interface EnvFile {
  /** Values by name; an empty value is kept (it reads as unset, as an empty variable does). */
  readonly values: Readonly<Record<string, string>>;
  /** Line number of each name, for problems. */
  readonly lines: Readonly<Record<string, number>>;
}

const LINE_RE = /^([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$/su;

/** Parses the text; `label` names the file in problems (its path). */
export function parseEnvFile(text: string, label: string): { file: EnvFile; problems: OptionError[] } {
  const values: Record<string, string> = {};
  const lines: Record<string, number> = {};
  const problems: OptionError[] = [];
  text.split(/\r?\n/u).forEach((raw, index) => {
    const lineNo = index + 1;
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const match = LINE_RE.exec(line);
    if (!match) {
      problems.push(new OptionError(`${label} line ${lineNo}`, ': expected NAME=VALUE (an environment-variable name) or a # comment'));
      return;
    }
    const name = match[1]!;
    if (Object.hasOwn(values, name)) {
      problems.push(new OptionError(`${label} line ${lineNo}`, `: ${name} is already set on line ${lines[name]}`));
      return;
    }
    values[name] = unquote(match[2]!.trim());
    lines[name] = lineNo;
  });
  return { file: { values: Object.freeze(values), lines: Object.freeze(lines) }, problems };
}

function unquote(value: string): string {
  const first = value[0];
  return value.length >= 2 && (first === '"' || first === "'") && value.endsWith(first) ? value.slice(1, -1) : value;
}
