/**
 * The default command: run the sidecar. Options come from the one table in config/options.ts,
 * so every flag shows its env twin and default in --help.
 */
import { Command, Option } from 'commander';
import { ConfigError } from '../config/config-error.js';
import { formatHostPort } from '../config/host-port.js';
import { SIDECAR_OPTIONS, type OptionSpec, type RawFlags } from '../config/options.js';
import { parseSidecarConfig, type SidecarConfig } from '../config/sidecar-config.js';
import { createLogger } from '../log.js';
import { startSidecar, type RunningSidecar } from '../sidecar.js';
import { CliExit, EXIT_USAGE, type CliIo } from './exit.js';

export function describeOption(spec: OptionSpec): string {
  const parts = [`env ${spec.env}`];
  if (spec.defaultText !== undefined) parts.push(`default ${spec.defaultText}`);
  return `${spec.help} (${parts.join(', ')})`;
}

export function registerRunCommand(program: Command, io: CliIo): void {
  const run = program
    .command('run', { isDefault: true })
    .description('run the sidecar: gRPC proxy with worker-side admission in front of an inference engine (the default command)');
  const envOnly: string[] = [];
  for (const spec of Object.values(SIDECAR_OPTIONS) as OptionSpec[]) {
    if (spec.flag) run.addOption(new Option(spec.flag, describeOption(spec)));
    else envOnly.push(`  ${spec.env.padEnd(34)} ${describeOption(spec).replace(/ \(env [^,)]+(, )?/, ' (').replace(/ \(\)$/, '')}`);
  }
  run.addHelpText('after', `\nEnvironment-only settings:\n${envOnly.join('\n')}\n\nExample:\n  DYN_ENGINE_REQUEST_LIMIT=32 dynamo-sidecar --upstream 127.0.0.1:50051\n`);
  run.action(async (flags: RawFlags) => {
    let config: SidecarConfig;
    try {
      config = parseSidecarConfig(flags, io.env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      for (const problem of err.problems) io.stderr.write(`dynamo-sidecar: ${problem}\n`);
      throw new CliExit(EXIT_USAGE);
    }
    await runSidecar(config, io);
  });
}

function startupLine(config: SidecarConfig, sidecar: RunningSidecar): string {
  const admission =
    config.engineRequestLimit === undefined
      ? 'admission off'
      : `engine request limit ${config.engineRequestLimit} + queue ${config.requestQueueLimit} (hard cap ${config.engineRequestLimit + config.requestQueueLimit})`;
  const listen = formatHostPort({ host: config.listen.host, port: sidecar.ingressPort });
  return `dynamo-sidecar: listening on ${listen}, upstream ${sidecar.upstreamAddress}, ${admission}, system port ${sidecar.systemPort}\n`;
}

async function runSidecar(config: SidecarConfig, io: CliIo): Promise<void> {
  const logger = createLogger({ level: config.logLevel, sink: io.stderr, base: { service: 'dynamo-sidecar' } });
  const sidecar = await startSidecar(config, { logger });
  io.stdout.write(startupLine(config, sidecar));
  logger.info('started', { listen_port: sidecar.ingressPort, system_port: sidecar.systemPort, upstream: sidecar.upstreamAddress });

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = async (signal: string): Promise<void> => {
      if (stopping) {
        logger.warn('second signal: exiting without waiting', { signal });
        process.exit(1);
      }
      stopping = true;
      logger.info('shutting down', { signal, grace_ms: config.drainGraceMs });
      const { remaining } = await sidecar.drain(config.drainGraceMs);
      if (remaining > 0) logger.warn('grace period over: cutting remaining calls', { remaining });
      await sidecar.close();
      logger.info('stopped');
      resolve();
    };
    process.once('SIGTERM', () => void stop('SIGTERM'));
    process.once('SIGINT', () => void stop('SIGINT'));
  });
}
