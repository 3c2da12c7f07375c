/**
 * `dynamo-sidecar frontend` (alias bin `dynamo-frontend`): the OpenAI-compatible HTTP router.
 * Options come from the one table in options.ts, so every flag shows its env twin and default
 * in --help. Bad values exit 2 naming the flag or variable; a second signal exits at once.
 */
import { Command, Option } from 'commander';
import { describeEnvTypo, findEnvTypos } from '../platform/config/env-typos.js';
import { describeOption, envOnlyHelp, type OptionSpec } from '../platform/config/option-spec.js';
import { USAGE_EXIT_CODE, applyUsageExit, keepRunningOnHangup, onFirstSignal, waitForSignal, type CommandIo } from '../platform/command-io.js';
import { exitWithError, parseOrExit, type ErrorVoice } from '../platform/command-errors.js';
import { createLogger, type Logger } from '../platform/log.js';
import { parseFrontendConfig, type FrontendConfig } from './frontend-config.js';
import type { RunningFrontend } from './frontend.js';
import { FRONTEND_OPTIONS, type FrontendRawFlags } from './options.js';

export const FRONTEND_HELP_EPILOGUE = `
Environment-only settings:
${envOnlyHelp(FRONTEND_OPTIONS)}

A worker is busy when any configured threshold (or --max-predicted-ttft-ms) fires on all of its
dp ranks; when every worker serving the model is busy (or refused with RESOURCE_EXHAUSTED),
requests get the overload status (529) with Retry-After. No threshold set = no busy rejection (the
sidecars' caps still apply). Among the workers that are not busy, the default router mode
(predicted-ttft) picks the one whose sidecar predicts the soonest first token; workers whose
events carry no prediction (older sidecars, Dynamo's workers) are routed least-loaded.

A request's priority (x-request-priority, else the body's priority, else --default-priority; lower
runs sooner) and tenant (x-tenant-id, else the body's user) go to the sidecar as gRPC metadata.
With --priority-threshold-scale, every threshold is scaled per priority class, so low classes get
529 first; a tenant over --tenant-max-inflight gets 429 ("slow down"), not 529 ("fleet full").

Examples:
  dynamo-sidecar frontend --worker 127.0.0.1:50050 --worker 127.0.0.1:50060 --active-decode-blocks-threshold 0.85
  NATS_SERVER=nats://127.0.0.1:4222 dynamo-frontend --router-mode kv --active-prefill-tokens-threshold 10000
`;

const VOICE: ErrorVoice = { prefix: 'dynamo-frontend: ' };

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function registerFrontendCommand(program: Command, io: CommandIo): Command {
  const command = program
    .command('frontend')
    .description("run the frontend: OpenAI-compatible HTTP router over the workers' sidecars, answering 529 when every worker is busy");
  for (const [key, spec] of Object.entries(FRONTEND_OPTIONS) as [string, OptionSpec][]) {
    if (!spec.flag) continue;
    const option = new Option(spec.flag, describeOption(spec));
    command.addOption(key === 'workers' ? option.argParser(collect) : option);
  }
  command.addHelpText('after', FRONTEND_HELP_EPILOGUE);
  applyUsageExit(command, io);
  // Commander names the repeatable --worker's list `worker`; the table key is `workers`.
  command.action(async ({ worker, ...flags }: Omit<FrontendRawFlags, 'workers'> & { worker?: string[] }) => {
    const config = parseOrExit(io, VOICE, () => parseFrontendConfig({ ...flags, workers: worker }, io.env));
    if (config === undefined) return;
    await runFrontend(config, io);
  });
  return command;
}

/** One line saying what runs: used by the startup line and the demo. */
export function describeFrontend(config: FrontendConfig, port: number): string {
  const host = config.httpHost === '0.0.0.0' ? '127.0.0.1' : config.httpHost;
  const sources = [config.workers.length ? `workers ${config.workers.join(',')}` : '', config.natsServers ? `nats ${config.natsServers.join(',')}` : '']
    .filter(Boolean)
    .join(', ');
  const set = Object.entries(config.thresholds)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => `${k}=${v}`);
  if (config.maxPredictedTtftMs !== null) set.push(`ttft_slo_ms=${config.maxPredictedTtftMs}`);
  return `listening on ${config.tls.http ? 'https' : 'http'}://${host}:${port}, ${sources}, router ${config.routerMode}, thresholds ${set.length ? set.join(' ') : 'none (busy rejection off)'}`;
}

async function runFrontend(config: FrontendConfig, io: CommandIo): Promise<void> {
  const logger = createLogger({ level: config.logLevel, sink: io.stderr, base: { service: 'dynamo-frontend' } });
  for (const warning of config.warnings) logger.warn(warning);
  const knownEnv = (Object.values(FRONTEND_OPTIONS) as OptionSpec[]).map((spec) => spec.env);
  for (const typo of findEnvTypos(io.env, knownEnv)) logger.warn(describeEnvTypo(typo), { variable: typo.name, suggestion: typo.suggestion });
  const stopIgnoringHangup = keepRunningOnHangup(io, () => logger.warn('SIGHUP received; configuration reload is not supported, ignoring'));
  let frontend: RunningFrontend;
  // Loaded here, not at the top: every command shares one CLI, and a sidecar process should not
  // hold the frontend's modules in memory (about 16 MB of RSS, docs/data-plane.md).
  const { NoLoadSourceError, startFrontend } = await import('./frontend.js');
  try {
    frontend = await startFrontend(config, { logger });
  } catch (err) {
    stopIgnoringHangup();
    return exitWithError(io, VOICE, `cannot start: ${(err as Error).message}`, err instanceof NoLoadSourceError ? USAGE_EXIT_CODE : 1);
  }
  // Listening before the startup line: a SIGTERM sent the moment it appears must drain, not kill.
  const signalReceived = waitForSignal(io);
  io.stdout.write(`dynamo-frontend: ${describeFrontend(config, frontend.port)}\n`);
  logger.info('started', {
    port: frontend.port,
    admin_port: frontend.adminPort ?? frontend.port,
    admin_api: config.adminApi,
    tokenizer: frontend.tokenizer.name,
    tokenizer_threads: config.tokenizerThreads,
    max_body_bytes: config.maxBodyBytes,
    worker_max_message_bytes: config.workerMaxMessageBytes,
  });
  const signal = await signalReceived;
  onFirstSignal(io, () => io.exit(1));
  await stopFrontend(frontend, logger, signal);
  stopIgnoringHangup();
  io.exit(0);
}

export async function stopFrontend(frontend: RunningFrontend, logger: Logger, signal: string): Promise<void> {
  logger.info('shutting down', { signal });
  await frontend.close();
  logger.info('stopped');
}
