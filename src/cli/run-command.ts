/**
 * The default command: run the sidecar. Options come from the one table in src/sidecar/config/options.ts,
 * so every flag shows its env twin and default in --help. Without an upstream (flag or env) it
 * is the demo: an embedded simulated vLLM engine behind the sidecar, with demo limits.
 */
import { Command, Option } from 'commander';
import { describeEnvTypo, findEnvTypos } from '../platform/config/env-typos.js';
import { formatHostPort } from '../platform/config/host-port.js';
import { DEMO_STATUS_INTERVAL_MS, SIDECAR_OPTIONS, type RawFlags } from '../sidecar/config/options.js';
import { describeOption, envOnlyHelp, type OptionSpec } from '../platform/config/option-spec.js';
import { DEFAULT_REQUEST_QUEUE_LIMIT, parseSidecarConfig, type SidecarConfig } from '../sidecar/config/sidecar-config.js';
import type { RunningEngine } from '../tools/engine/index.js';
import { createLogger, redactUrlCredentials, type Logger } from '../platform/log.js';
import { startSidecar, type RunningSidecar } from '../sidecar/sidecar.js';
import { applyUsageExit, keepRunningOnHangup, onFirstSignal, waitForSignal, type CommandIo } from '../platform/command-io.js';
import { exitWithError, parseOrExit, type ErrorVoice } from '../platform/command-errors.js';
import { StatusLine } from './status-line.js';
import { reloadConfigFile } from '../sidecar/config-reload.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Demo mode limits, when the user set none: small enough that a load of 200 shows rejections. */
export const DEMO_ENGINE_REQUEST_LIMIT = 32;

/** Shown after the run command's options, also in the top-level --help. */
export const RUN_HELP_EPILOGUE = `
Environment-only settings:
${envOnlyHelp(SIDECAR_OPTIONS)}

Without --upstream (or DYN_SIDECAR_UPSTREAM) the sidecar starts an embedded simulated vLLM engine
(demo mode) with engine request limit ${DEMO_ENGINE_REQUEST_LIMIT} and queue ${DEFAULT_REQUEST_QUEUE_LIMIT} unless set otherwise.

Examples:
  DYN_ENGINE_REQUEST_LIMIT=32 dynamo-sidecar --upstream 127.0.0.1:50051
  dynamo-sidecar --upstream 127.0.0.1:50051 --engine-request-limit 32 \\
      --engine-metrics-url http://127.0.0.1:8000/metrics --nats-url nats://127.0.0.1:4222
`;

const VOICE: ErrorVoice = { prefix: 'dynamo-sidecar: ' };

export function registerRunCommand(program: Command, io: CommandIo): Command {
  const run = program
    .command('run', { isDefault: true })
    .description('run the sidecar: gRPC proxy with worker-side admission in front of an inference engine (the default command)');
  for (const spec of Object.values(SIDECAR_OPTIONS) as OptionSpec[]) {
    if (spec.flag) run.addOption(new Option(spec.flag, describeOption(spec)));
  }
  run.addHelpText('after', RUN_HELP_EPILOGUE);
  applyUsageExit(run, io);
  run.action(async (flags: RawFlags) => {
    const config = parseOrExit(io, VOICE, () => parseSidecarConfig(flags, io.env));
    if (config === undefined) return;
    await runSidecar(config, io, flags);
  });
  return run;
}

function describeAdmission(config: SidecarConfig): string {
  const limit = config.engineRequestLimit;
  if (limit !== undefined && config.engineRequestLimitAuto)
    return `engine request limit auto (${limit} until the engine tells its max_num_seqs) + queue ${config.requestQueueLimit}`;
  return limit === undefined
    ? 'admission off'
    : `engine request limit ${limit} + queue ${config.requestQueueLimit} (hard cap ${limit + config.requestQueueLimit})`;
}

async function runSidecar(requested: SidecarConfig, io: CommandIo, flags: RawFlags): Promise<void> {
  const logger = createLogger({ level: requested.logLevel, sink: io.stderr, base: { service: 'dynamo-sidecar' } });
  let onHangup = (): void => logger.warn('SIGHUP received before the sidecar started; ignored');
  const stopIgnoringHangup = keepRunningOnHangup(io, () => onHangup());
  // A mistyped setting would otherwise be ignored in silence (DYN_ENGINE_REQUEST_LIMT: admission off).
  const knownEnv = (Object.values(SIDECAR_OPTIONS) as OptionSpec[]).map((spec) => spec.env);
  for (const typo of findEnvTypos(io.env, knownEnv)) logger.warn(describeEnvTypo(typo), { variable: typo.name, suggestion: typo.suggestion });
  const demo = requested.upstream === undefined;
  let config = requested;
  let engine: RunningEngine | undefined;
  if (demo) {
    // The simulated engine's modules stay out of a sidecar that fronts a real engine.
    const { startSimulatedEngine } = await import('../tools/engine/index.js');
    engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0 });
    // The embedded engine's batch budget is known; publish it like a configured one.
    config = Object.freeze({
      ...requested,
      engineRequestLimit: requested.engineRequestLimit ?? DEMO_ENGINE_REQUEST_LIMIT,
      load: Object.freeze({ ...requested.load, maxNumBatchedTokens: requested.load.maxNumBatchedTokens ?? engine.options.maxNumBatchedTokens }),
    });
    io.stdout.write(`dynamo-sidecar: demo mode, no --upstream given: embedded simulated vLLM engine at ${engine.address} (metrics ${engine.metricsUrl})\n`);
  }
  let sidecar: RunningSidecar;
  try {
    sidecar = await startSidecar(config, {
      logger,
      upstream: engine ? { host: '127.0.0.1', port: engine.grpcPort } : undefined,
      engineMetricsUrl: engine?.metricsUrl,
    });
  } catch (err) {
    await engine?.close();
    stopIgnoringHangup();
    return exitWithError(io, VOICE, `cannot start: ${(err as Error).message}`);
  }
  // Listening before the startup line: a SIGTERM sent the moment it appears must drain, not kill.
  const signalReceived = waitForSignal(io);
  const listen = formatHostPort({ host: config.listen.host, port: sidecar.ingressPort });
  io.stdout.write(
    `dynamo-sidecar: listening on ${listen}, upstream ${sidecar.upstreamAddress}, ${describeAdmission(config)}, system port ${sidecar.systemPort}\n`,
  );
  if (demo)
    io.stdout.write(`dynamo-sidecar: try: ./bin/dynamo-sidecar load --target ${listen.replace('0.0.0.0', '127.0.0.1')} --concurrency 200 --duration-s 20\n`);
  logger.info('started', {
    listen_port: sidecar.ingressPort,
    system_port: sidecar.systemPort,
    upstream: sidecar.upstreamAddress,
    load_subject: sidecar.loadSubject,
    grpc_address: sidecar.grpcAddress,
    ...(config.load.servedModelName === undefined ? {} : { model: config.load.servedModelName }),
  });

  // SIGHUP re-reads --config-file and applies its live settings (docs/operations/admission.md).
  onHangup = () => {
    try {
      reloadConfigFile({ flags, env: io.env, startup: config, control: sidecar.admission, logger });
    } catch (err) {
      logger.error('SIGHUP: config file not applied, settings unchanged', { error: redactUrlCredentials((err as Error).message) });
    }
  };

  const statusEveryMs = config.statusIntervalMs ?? (demo ? DEMO_STATUS_INTERVAL_MS : 0);
  const status = statusEveryMs > 0 ? new StatusLine(sidecar, io.stdout, statusEveryMs) : undefined;

  const signal = await signalReceived;
  status?.stop();
  onFirstSignal(io, () => {
    logger.warn('second signal: exiting without waiting for calls to finish');
    io.exit(1);
  });
  await shutdown(sidecar, engine, config, logger, signal);
  stopIgnoringHangup();
  io.exit(0);
}

async function shutdown(sidecar: RunningSidecar, engine: RunningEngine | undefined, config: SidecarConfig, logger: Logger, signal: string): Promise<void> {
  logger.info('shutting down', { signal, grace_ms: config.drainGraceMs, delay_ms: config.drainDelayMs });
  if (config.drainDelayMs > 0) {
    // Not ready and draining in the load events at once, still serving while endpoints are taken out.
    sidecar.announceDrain();
    await sleep(config.drainDelayMs);
  }
  const { remaining } = await sidecar.drain(config.drainGraceMs);
  if (remaining > 0) logger.warn('grace period over: cutting remaining calls', { remaining });
  await sidecar.close();
  await engine?.close();
  logger.info('stopped');
}
