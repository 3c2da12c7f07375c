/**
 * dynamo-sidecar CLI entry: `run` (default), plus the simulated engine and the load client.
 * Usage errors exit 2 with one line naming the offending flag or variable.
 */
import { Command, CommanderError } from 'commander';
import { CliExit, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, processIo, type CliIo } from './exit.js';
import { registerRunCommand } from './run-command.js';

export function buildProgram(io: CliIo): Command {
  const program = new Command('dynamo-sidecar')
    .description('Worker-side admission sidecar for LLM inference engines (gRPC).')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .exitOverride();
  registerRunCommand(program, io);
  for (const command of program.commands) command.exitOverride().configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });
  return program;
}

export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  try {
    await buildProgram(io).parseAsync(argv as string[], { from: 'user' });
    return EXIT_OK;
  } catch (err) {
    if (err instanceof CliExit) return err.exitCode;
    if (err instanceof CommanderError) {
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.help' || err.code === 'commander.version' ? EXIT_OK : EXIT_USAGE;
    }
    io.stderr.write(`dynamo-sidecar: ${(err as Error).stack ?? String(err)}\n`);
    return EXIT_FAILURE;
  }
}

const isEntry = process.argv[1] !== undefined && import.meta.url.endsWith('/cli/main.js');
if (isEntry) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
