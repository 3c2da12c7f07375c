/**
 * What the built CLI accepts, read from its own `--help` (run as a process): the flags and the
 * environment variables of the sidecar (`run`, the default command), the frontend and the
 * simulated engine. Deployment files are checked against it, so a renamed flag or variable fails
 * their tests.
 *
 *   const surface = await cliSurface();
 *   surface.run.flags.has('--upstream'); surface.frontend.env.has('NATS_SERVER');
 *   checkInvocation(surface, ['frontend', '--http-port', '8000'], ['DYN_ROUTER_MODE']) // problems, [] when all known
 */
import { runCli } from '../../support/sidecar-process.js';

export type CommandName = 'run' | 'frontend' | 'engine';

export interface CommandSurface {
  readonly flags: ReadonlySet<string>;
  readonly env: ReadonlySet<string>;
}

export type CliSurface = Readonly<Record<CommandName, CommandSurface>>;

const HELP_ARGS: Record<CommandName, string[]> = { run: ['--help'], frontend: ['frontend', '--help'], engine: ['engine', '--help'] };

/** Flags are the option column (two spaces, then `--name`); variables are each option's `(env NAME` and the "Environment-only settings" rows. */
export function parseHelp(text: string): CommandSurface {
  const flags = new Set<string>();
  for (const match of text.matchAll(/^ {2}(?:-\w, )?(--[a-z][a-z0-9-]*)/gm)) flags.add(match[1]!);
  const env = new Set<string>();
  for (const match of text.matchAll(/\(env\s+([A-Z][A-Z0-9_]*)/g)) env.add(match[1]!);
  const envOnly = /^Environment-only settings:\n((?: {2}.*\n?)*)/m.exec(text)?.[1] ?? '';
  for (const match of envOnly.matchAll(/^ {2}([A-Z][A-Z0-9_]*)\s/gm)) env.add(match[1]!);
  return { flags, env };
}

export async function cliSurface(): Promise<CliSurface> {
  const read = async (command: CommandName): Promise<CommandSurface> => {
    const result = await runCli(HELP_ARGS[command]);
    if (result.code !== 0) throw new Error(`dynamo-sidecar ${HELP_ARGS[command].join(' ')} exited with ${result.code}: ${result.stderr}`);
    // The default command's help lists the program's commands first, then run's own options.
    const text = command === 'run' ? result.stdout.slice(result.stdout.indexOf('The default command, run:')) : result.stdout;
    return parseHelp(text);
  };
  const [run, frontend, engine] = await Promise.all([read('run'), read('frontend'), read('engine')]);
  return { run, frontend, engine };
}

/** The command an argument list runs: its first word when that names a subcommand, else the sidecar. */
export function commandOf(args: readonly string[]): CommandName {
  return args[0] === 'frontend' || args[0] === 'engine' ? args[0] : 'run';
}

/** Every `--flag` (or `--flag=value`) in `args` and every variable in `env` that the command's --help does not list. */
export function unknownSettings(surface: CliSurface, args: readonly string[], env: readonly string[]): string[] {
  const command = commandOf(args);
  const { flags, env: known } = surface[command];
  const problems: string[] = [];
  for (const arg of args) {
    if (!arg.startsWith('--')) continue;
    const flag = arg.split('=')[0]!;
    if (!flags.has(flag)) problems.push(`${command}: no flag ${flag}`);
  }
  for (const name of env) if (!known.has(name)) problems.push(`${command}: no variable ${name}`);
  return problems;
}
