/**
 * How every command ends on an error it expects, in one place so none forgets a step: a refused
 * configuration prints each problem and exits 2 (usage), a failed start prints one line and
 * exits 1 (or the code given). Every line goes through `redactUrlCredentials`: a problem quotes
 * the bad value, and an error message may quote a URL, either of which may hold a password.
 */
import { USAGE_EXIT_CODE, type CommandIo } from './command-io.js';
import { ConfigError } from './config/config-error.js';
import { redactUrlCredentials } from './log.js';

/** How a command signs its error lines. */
export interface ErrorVoice {
  /** Starts every line: `dynamo-sidecar: `, `dynamo-frontend: `, `error: `. */
  readonly prefix: string;
  /** All problems on one line, joined by `; ` (the tools' output since they were written), instead of one line each. */
  readonly oneLine?: boolean;
}

/**
 * `parse()`'s value; on a ConfigError, prints its problems and exits 2, and returns undefined
 * (only a fake `io.exit` returns). Any other error is rethrown.
 */
export function parseOrExit<T>(io: CommandIo, voice: ErrorVoice, parse: () => T): T | undefined {
  try {
    return parse();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    for (const line of voice.oneLine ? [err.message] : err.problems) io.stderr.write(`${voice.prefix}${redactUrlCredentials(line)}\n`);
    io.exit(USAGE_EXIT_CODE);
    return undefined;
  }
}

/** Prints `message` as one line and exits with `code` (1: a failure at start, not a usage error). */
export function exitWithError(io: CommandIo, voice: ErrorVoice, message: string, code = 1): void {
  io.stderr.write(`${voice.prefix}${redactUrlCredentials(message)}\n`);
  io.exit(code);
}
