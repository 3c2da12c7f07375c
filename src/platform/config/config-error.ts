/**
 * Configuration errors, shared by every command: each problem names the flag or variable at
 * fault, and all of them are reported at once; the CLI prints each and exits 2.
 */

/** One bad value, naming its flag (or environment variable). */
export class OptionError extends Error {
  override readonly name = 'OptionError';
  readonly code = 'ERR_SIDECAR_OPTION';

  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(`${flag}: ${message}`);
  }
}

/** Every problem found, in the order the options were read. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'ERR_SIDECAR_CONFIG';

  constructor(
    readonly problems: readonly string[],
    /** The same problems as OptionErrors, where the parser made them so. */
    readonly errors: readonly OptionError[] = [],
  ) {
    super(problems.join('; '));
  }

  static of(errors: readonly OptionError[]): ConfigError {
    return new ConfigError(
      errors.map((e) => e.message),
      errors,
    );
  }
}
