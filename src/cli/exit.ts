/** Exit codes the CLI uses: 0 done, 1 runtime failure, 2 bad input (flags, env, arguments). */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export interface CliIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: Readonly<Record<string, string | undefined>>;
}

export const processIo: CliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env };

/** Thrown to leave the CLI with an exit code after the message has been printed. */
export class CliExit extends Error {
  override readonly name = 'CliExit';

  constructor(readonly exitCode: number) {
    super(`exit ${exitCode}`);
  }
}
