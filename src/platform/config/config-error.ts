/**
 * Configuration errors, one dialect for every command: a parser reports each problem with
 * `report(source, sentence)`, naming the flag, variable or file line at fault, and ends with
 * `check(code)`, which throws one ConfigError listing them all, so a user fixes every value in
 * one go. The command prints each problem and exits 2 (command-errors.ts).
 */

/** Which command's configuration was refused: a stable code per command, for callers that branch on it. */
export type ConfigErrorCode = 'ERR_SIDECAR_CONFIG' | 'ERR_FRONTEND_CONFIG' | 'ERR_ENGINE_CONFIG' | 'ERR_LOAD_CONFIG' | 'ERR_DEMO_CONFIG';

/** One bad value, naming its source (a flag, an environment variable, a config file's line). */
export class OptionError extends Error {
  override readonly name = 'OptionError';
  readonly code = 'ERR_CONFIG_OPTION';

  /**
   * `sentence` says what is wrong and follows the source after a space (`must be an integer >= 1,
   * got "x"`), or directly when it starts with a colon (`: not HOST:PORT`), which sets a message
   * of its own apart from the source.
   */
  constructor(
    readonly flag: string,
    readonly sentence: string,
  ) {
    super(sentence.startsWith(':') ? `${flag}${sentence}` : `${flag} ${sentence}`);
  }
}

/** Every problem found, in the order the options were read. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly problems: readonly string[];

  constructor(
    readonly code: ConfigErrorCode,
    readonly errors: readonly OptionError[],
  ) {
    const problems = errors.map((e) => e.message);
    super(problems.join('; '));
    this.problems = problems;
  }
}

/** Collects a parse's problems; `check` throws them as one ConfigError. */
export class Problems {
  readonly #errors: OptionError[] = [];

  /** The problems so far, as the command prints them. */
  get problems(): readonly string[] {
    return this.#errors.map((e) => e.message);
  }

  /** The same problems with their sources. */
  get errors(): readonly OptionError[] {
    return [...this.#errors];
  }

  /** One problem with the value from `source`; see OptionError for how `sentence` reads. */
  report(source: string, sentence: string): void {
    this.#errors.push(new OptionError(source, sentence));
  }

  /** Problems found elsewhere (e.g. by a file parser), kept in order. */
  reportAll(errors: readonly OptionError[]): void {
    this.#errors.push(...errors);
  }

  /** Throws a ConfigError with `code` and every problem seen so far; returns when there is none. */
  check(code: ConfigErrorCode): void {
    if (this.#errors.length) throw new ConfigError(code, [...this.#errors]);
  }
}
