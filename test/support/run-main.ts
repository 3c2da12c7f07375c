/**
 * Runs the CLI in process, as `dynamo-sidecar ARGS` would with exactly this environment: what it
 * printed and the exit codes it asked for. For runs that end by themselves (usage errors,
 * --help): a command that starts would wait for a signal that never comes.
 */
import { main } from '../../src/cli/main.js';
import { fakeIo } from './fake-io.js';

export interface MainRun {
  out: string;
  err: string;
  exits: number[];
}

export async function runMain(args: readonly string[], env: Record<string, string> = {}): Promise<MainRun> {
  const io = { ...fakeIo(), env };
  await main(args, io);
  return { out: io.out.join(''), err: io.err.join(''), exits: io.exits };
}
