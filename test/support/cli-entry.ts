/**
 * Minimal CLI with only the engine and load subcommands, so tests can run them as real
 * processes (`node --import tsx test/support/cli-entry.ts engine ...`) before src/cli exists.
 */
import { Command } from 'commander';
import { registerEngineCommand } from '../../src/tools/engine/command.js';
import { registerLoadCommand } from '../../src/tools/load/command.js';

const program = new Command('dynamo-sidecar');
registerEngineCommand(program);
registerLoadCommand(program);
await program.parseAsync(process.argv);
