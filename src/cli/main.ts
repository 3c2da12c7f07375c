/**
 * dynamo-sidecar CLI: `run` (the default: the sidecar, or the sidecar-only demo without
 * --upstream), `frontend` (the OpenAI-compatible router; also the `dynamo-frontend` bin), `demo`
 * (the whole system on one machine), `engine` (the simulated vLLM engine) and `load` (the load
 * client). Usage errors exit 2 with one line per problem naming the offending flag or variable
 * (platform/command-errors.ts); --help exits 0.
 *
 * Where a command lives: in the folder of the one part it runs (frontend/command.ts,
 * tools/engine/command.ts, tools/load/command.ts). A command composing parts that may not import
 * each other lives here: `run` (the sidecar embeds the simulated engine, a tool, in demo mode)
 * and `demo` (everything), with what serves only them (status-line.ts).
 */
import { Command } from 'commander';
import { registerEngineCommand } from '../tools/engine/command.js';
import { registerFrontendCommand } from '../frontend/command.js';
import { registerLoadCommand } from '../tools/load/command.js';
import { applyUsageExit, processIo, type CommandIo } from '../platform/command-io.js';
import { exitWithError } from '../platform/command-errors.js';
import { registerDemoCommand } from './demo-command.js';
import { RUN_HELP_EPILOGUE, registerRunCommand } from './run-command.js';

export function buildProgram(io: CommandIo): Command {
  const program = new Command('dynamo-sidecar')
    .description(
      'Worker-side admission sidecar for LLM inference engines (gRPC): caps calls in the engine, queues a few, rejects the rest with RESOURCE_EXHAUSTED.',
    )
    .showHelpAfterError('(run with --help for usage)');
  applyUsageExit(program, io);
  const run = registerRunCommand(program, io);
  registerFrontendCommand(program, io);
  registerDemoCommand(program, io);
  registerEngineCommand(program, io);
  registerLoadCommand(program, { ...io, progress: process.stderr });
  program.addHelpText('after', () => {
    const runHelp = run.helpInformation();
    return `\nThe default command, run:\n${runHelp.slice(runHelp.indexOf('Options:'))}${RUN_HELP_EPILOGUE}`;
  });
  return program;
}

export async function main(argv: readonly string[], io: CommandIo = processIo): Promise<void> {
  try {
    await buildProgram(io).parseAsync(argv, { from: 'user' });
  } catch (err) {
    // Commander errors have been printed and turned into an exit code by applyUsageExit.
    if ((err as { code?: string }).code?.startsWith('commander.')) return;
    exitWithError(io, { prefix: 'dynamo-sidecar: ' }, (err as Error).stack ?? String(err));
  }
}

/** The `dynamo-frontend` bin is `dynamo-sidecar frontend`. */
export function argvFor(binPath: string, args: readonly string[]): string[] {
  return /(^|[\\/])dynamo-frontend$/.test(binPath) ? ['frontend', ...args] : [...args];
}

if (process.argv[1] !== undefined && import.meta.url.endsWith('/cli/main.js')) {
  await main(argvFor(process.argv[1], process.argv.slice(2)));
}
