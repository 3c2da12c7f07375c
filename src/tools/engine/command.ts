/**
 * `dynamo-sidecar engine`: runs the simulated vLLM engine standalone until SIGTERM/SIGINT.
 * Prints one line with its addresses once both servers listen, e.g.
 *   simulated engine ready grpc=127.0.0.1:50051 metrics=http://127.0.0.1:9400/metrics model=simulated-model
 */
import { ConfigError } from '../../platform/config/config-error.js';
import type { Command } from 'commander';
import type { CommandIo } from '../../platform/command-io.js';
import { applyUsageExit, processIo, USAGE_EXIT_CODE, waitForSignal } from '../../platform/command-io.js';
import { startSimulatedEngine } from './index.js';
import type { EngineCliValues, EngineOptions } from './options.js';
import { DEFAULT_ENGINE_OPTIONS as D, ENGINE_FLAGS, engineOptionsFromCli } from './options.js';

const HELP: Readonly<Record<keyof EngineOptions, string>> = {
  numGpuBlocks: 'KV cache size in blocks (vllm:cache_config_info num_gpu_blocks)',
  blockSize: 'tokens per KV block',
  maxNumSeqs: 'most sequences running at once; more wait in the queue',
  maxNumBatchedTokens: 'token budget of one scheduler step (decode + prefill chunks)',
  prefillTokensPerS: 'prefill speed in tokens/s; a step lasts prefill tokens / rate longer',
  decodeStepMs: 'duration of a decode step; each running sequence gains one token per step',
  maxOutputTokens: 'cap on output tokens per request; larger max_tokens are clamped',
  maxModelLen: 'context limit, prompt + output; 0 = the whole KV cache',
  earlyStopProb: 'per-token chance of finishing early with finish_reason "stop" (0..1)',
  seed: 'seed of generated token ids and early stops',
  vocabSize: 'token ids are drawn from 1 .. vocab-size - 1',
  modelName: 'model name in GetModelInfo and the model_name metric label',
  host: 'address both servers listen on',
  port: 'gRPC port (0 = any free port)',
  metricsPort: 'Prometheus /metrics port (0 = any free port)',
};

function flagWithValue(flag: string): string {
  return `${flag} <value>`;
}

export function registerEngineCommand(program: Command, io: CommandIo = processIo): Command {
  const command = program
    .command('engine')
    .description('Run the simulated vLLM gRPC engine (vllm.grpc.engine.VllmEngine + grpc.health.v1) with vLLM-named /metrics');
  for (const key of Object.keys(ENGINE_FLAGS) as (keyof EngineOptions)[]) {
    command.option(flagWithValue(ENGINE_FLAGS[key]), HELP[key], String(D[key]));
  }
  applyUsageExit(command, io);
  command.action(async (raw: Record<string, string>) => {
    let options: EngineOptions;
    try {
      const values: EngineCliValues = {};
      for (const key of Object.keys(ENGINE_FLAGS) as (keyof EngineOptions)[]) {
        const value = raw[key];
        if (value !== undefined) values[key] = value;
      }
      options = engineOptionsFromCli(values);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      io.stderr.write(`error: ${error.message}\n`);
      io.exit(USAGE_EXIT_CODE);
      return;
    }
    let engine;
    try {
      engine = await startSimulatedEngine(options);
    } catch (error) {
      io.stderr.write(`error: cannot start the simulated engine: ${error instanceof Error ? error.message : String(error)}\n`);
      io.exit(1);
      return;
    }
    const signal = waitForSignal(io);
    io.stdout.write(`simulated engine ready grpc=${engine.address} metrics=${engine.metricsUrl} model=${options.modelName}\n`);
    await signal;
    await engine.close();
    io.exit(0);
  });
  return command;
}
