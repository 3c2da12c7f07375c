/**
 * `dynamo-sidecar engine`: runs the simulated vLLM engine standalone until SIGTERM/SIGINT.
 * Prints one line with its addresses once both servers listen, e.g.
 *   simulated engine ready grpc=127.0.0.1:50051 metrics=http://127.0.0.1:9400/metrics model=simulated-model
 */
import { Option, type Command } from 'commander';
import { describeOption } from '../../platform/config/option-spec.js';
import type { CommandIo } from '../../platform/command-io.js';
import { applyUsageExit, processIo, waitForSignal } from '../../platform/command-io.js';
import { exitWithError, parseOrExit, type ErrorVoice } from '../../platform/command-errors.js';
import { ENGINE_OPTIONS, engineOptionsFromCli, type EngineCliValues } from './options.js';

const VOICE: ErrorVoice = { prefix: 'error: ', oneLine: true };

export function registerEngineCommand(program: Command, io: CommandIo = processIo): Command {
  const command = program
    .command('engine')
    .description('Run the simulated vLLM gRPC engine (vllm.grpc.engine.VllmEngine + grpc.health.v1) with vLLM-named /metrics');
  // No commander defaults: an unset flag must leave its env twin (and then the table's default) to the reader.
  for (const spec of Object.values(ENGINE_OPTIONS)) command.addOption(new Option(spec.flag, describeOption(spec)));
  command.addHelpText('after', '\nEvery flag has an environment twin (DYN_SIM_ENGINE_*, shown with it); the flag wins when both are set.');
  applyUsageExit(command, io);
  command.action(async (values: EngineCliValues) => {
    const options = parseOrExit(io, VOICE, () => engineOptionsFromCli(values, io.env));
    if (options === undefined) return;
    let engine;
    try {
      // Loaded only by the command that runs it (the CLI's commands share one process image).
      const { startSimulatedEngine } = await import('./index.js');
      engine = await startSimulatedEngine(options);
    } catch (error) {
      return exitWithError(io, VOICE, `cannot start the simulated engine: ${error instanceof Error ? error.message : String(error)}`);
    }
    const signal = waitForSignal(io);
    io.stdout.write(`simulated engine ready grpc=${engine.address} metrics=${engine.metricsUrl} model=${options.modelName}\n`);
    await signal;
    await engine.close();
    io.exit(0);
  });
  return command;
}
