/** Startup configuration problems, all of them at once; the CLI prints each and exits 2. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'ERR_SIDECAR_CONFIG';

  constructor(readonly problems: readonly string[]) {
    super(problems.join('; '));
  }
}
