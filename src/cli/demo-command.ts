/**
 * `dynamo-sidecar demo`: the whole system on one machine, no broker: W workers (a simulated vLLM
 * engine behind its own sidecar each, with caps small enough that a laptop can overload them)
 * and the frontend on :8000 reading their load over the sidecars' WorkerLoad.Watch push, with
 * busy thresholds set. Prints the status page's URL first, then what runs and the lines to try, and a status line every few
 * seconds; SIGINT/SIGTERM stops everything.
 */
import type { Command } from 'commander';
import { ConfigError, Problems } from '../platform/config/config-error.js';
import { parseSidecarConfig } from '../sidecar/config/sidecar-config.js';
import type { RunningEngine } from '../tools/engine/index.js';
import { parseFrontendConfig, type FrontendConfig } from '../frontend/frontend-config.js';
import { FRONTEND_OPTIONS } from '../frontend/options.js';
import { describeFrontend } from '../frontend/command.js';
import type { RunningFrontend } from '../frontend/frontend.js';
import { createLogger } from '../platform/log.js';
import { startSidecar, type RunningSidecar } from '../sidecar/sidecar.js';
import { applyUsageExit, onFirstSignal, waitForSignal, type CommandIo } from '../platform/command-io.js';
import { exitWithError, parseOrExit, type ErrorVoice } from '../platform/command-errors.js';

/**
 * Each demo worker: small KV and caps, so 64 concurrent requests overload two of them. Its engine
 * prices steps as Llama-3.3-70B in fp8 on 2 x H100 (about 19 ms a step at the demo's batch of 8,
 * slower as batches and contexts grow), with its KV cut to 128 blocks (explicit options win over
 * the preset). Steps that long leave a 2-core machine's proxies mostly idle, so time runs at 1x.
 * Admission is the overload sweep's best configuration (npm run bench:overload, docs/performance.md):
 * N 12, Q 4, first-token limit 2, refusal beyond 50 ms of expected wait, adaptive pushback, and the
 * frontend routing by the sidecars' predicted TTFT with no busy threshold (one can be set).
 */
export const DEMO_DEFAULTS = Object.freeze({
  workers: 2,
  httpPort: FRONTEND_OPTIONS.httpPort.default,
  engineRequestLimit: 12,
  requestQueueLimit: 4,
  firstTokenLimit: 2,
  maxQueueWaitMs: 50,
  retryPushbackMode: 'adaptive',
  enginePreset: 'llama-3.3-70b-fp8-2xh100',
  engineTimeScale: 1,
  numGpuBlocks: 128,
  statusIntervalMs: 5000,
});

interface DemoFlags {
  httpPort: string;
  workers: string;
  engineRequestLimit: string;
  activeDecodeBlocksThreshold?: string;
  quiet?: boolean;
}

const VOICE: ErrorVoice = { prefix: 'dynamo-sidecar demo: ' };

/**
 * The frontend's config for the demo's flags. --workers first, alone; then the others by the
 * real parsers, so a bad value gets the same message as on the real commands, as the demo's.
 */
function parseDemoFlags(flags: DemoFlags): FrontendConfig {
  const problems = new Problems();
  const workers = Number(flags.workers);
  if (!/^\d+$/.test(flags.workers) || workers < 1 || workers > 16) problems.report('--workers', `must be an integer in 1..16, got "${flags.workers}"`);
  problems.check('ERR_DEMO_CONFIG');
  try {
    parseSidecarConfig({ engineRequestLimit: flags.engineRequestLimit }, {});
    return parseFrontendConfig({ httpPort: flags.httpPort, activeDecodeBlocksThreshold: flags.activeDecodeBlocksThreshold, workers: ['127.0.0.1:1'] }, {});
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new ConfigError('ERR_DEMO_CONFIG', err.errors);
  }
}

export function registerDemoCommand(program: Command, io: CommandIo): Command {
  const d = DEMO_DEFAULTS;
  const command = program
    .command('demo')
    .description(
      "run the whole system on this machine, no broker: the frontend on :8000 and simulated workers (engine + sidecar each), admission as the overload sweep's best configuration",
    )
    .option('--http-port <port>', "the frontend's HTTP port; 0 picks a free one", String(d.httpPort))
    .option('--workers <n>', 'simulated workers (engine + sidecar each), 1..16', String(d.workers))
    .option('--engine-request-limit <n>', `each sidecar's engine request limit N (queue Q = ${d.requestQueueLimit})`, String(d.engineRequestLimit))
    .option(
      '--active-decode-blocks-threshold <fraction>',
      `the frontend's --active-decode-blocks-threshold (each engine has ${d.numGpuBlocks} KV blocks); unset = no busy threshold, the sidecars' refusals decide`,
    )
    .option('--quiet', 'no status line');
  applyUsageExit(command, io);
  command.action(async (flags: DemoFlags) => {
    const frontendConfig = parseOrExit(io, VOICE, () => parseDemoFlags(flags));
    if (frontendConfig === undefined) return;
    await runDemo(Number(flags.workers), flags, frontendConfig.httpPort, io);
  });
  return command;
}

async function runDemo(count: number, flags: DemoFlags, httpPort: number, io: CommandIo): Promise<void> {
  const logger = createLogger({ level: 'warn', sink: io.stderr, base: { service: 'dynamo-demo' } });
  const engines: RunningEngine[] = [];
  const sidecars: RunningSidecar[] = [];
  let frontend: RunningFrontend | undefined;
  let signalReceived: Promise<'SIGTERM' | 'SIGINT'>;
  const stopAll = async (): Promise<void> => {
    await frontend?.close();
    await Promise.all(sidecars.map((s) => s.close()));
    await Promise.all(engines.map((e) => e.close()));
  };
  // The demo's parts are loaded when it runs: the CLI's other commands share this module graph.
  const [{ startSimulatedEngine }, { startFrontend }] = await Promise.all([import('../tools/engine/index.js'), import('../frontend/frontend.js')]);
  try {
    for (let i = 0; i < count; i++) {
      const engine = await startSimulatedEngine({
        host: '127.0.0.1',
        port: 0,
        metricsPort: 0,
        preset: DEMO_DEFAULTS.enginePreset,
        timeScale: DEMO_DEFAULTS.engineTimeScale,
        numGpuBlocks: DEMO_DEFAULTS.numGpuBlocks,
        seed: i,
      });
      engines.push(engine);
      const config = parseSidecarConfig(
        {
          listen: '127.0.0.1:0',
          systemHost: '127.0.0.1',
          systemPort: '0',
          engineRequestLimit: flags.engineRequestLimit,
          firstTokenLimit: String(DEMO_DEFAULTS.firstTokenLimit),
          maxQueueWaitMs: String(DEMO_DEFAULTS.maxQueueWaitMs),
          retryPushbackMode: DEMO_DEFAULTS.retryPushbackMode,
          maxNumBatchedTokens: String(engine.options.maxNumBatchedTokens),
          workerId: String(i + 1),
        },
        { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: String(DEMO_DEFAULTS.requestQueueLimit) },
      );
      sidecars.push(
        await startSidecar(config, {
          logger: logger.child({ worker: i + 1 }),
          upstream: { host: '127.0.0.1', port: engine.grpcPort },
          engineMetricsUrl: engine.metricsUrl,
        }),
      );
    }
    const workers = sidecars.map((s) => `127.0.0.1:${s.ingressPort}`);
    const config = parseFrontendConfig({ httpPort: String(httpPort), activeDecodeBlocksThreshold: flags.activeDecodeBlocksThreshold, workers }, {});
    frontend = await startFrontend(config, { logger: logger.child({ component: 'frontend' }) });
    const url = `http://127.0.0.1:${frontend.port}`;
    // Listening before the startup lines: a SIGTERM sent the moment they appear must stop cleanly, not kill.
    signalReceived = waitForSignal(io);
    io.stdout.write(
      [
        // The page first: it is what an operator opens (one line; SIGTERM tests match its start).
        `dynamo-sidecar demo: frontend status page ${url}/status (the fleet, live)`,
        `dynamo-sidecar demo: frontend ${describeFrontend(config, frontend.port)}`,
        ...sidecars.map(
          (s, i) =>
            `dynamo-sidecar demo: worker ${i + 1}: sidecar 127.0.0.1:${s.ingressPort} (N=${flags.engineRequestLimit}, Q=${DEMO_DEFAULTS.requestQueueLimit}, F=${DEMO_DEFAULTS.firstTokenLimit}, max queue wait ${DEMO_DEFAULTS.maxQueueWaitMs} ms, metrics http://127.0.0.1:${s.systemPort}/metrics, status page http://127.0.0.1:${s.systemPort}/status) -> simulated engine ${engines[i]!.address} (${DEMO_DEFAULTS.enginePreset}, ${DEMO_DEFAULTS.numGpuBlocks} KV blocks)`,
        ),
        'try:',
        `  curl -s ${url}/v1/models`,
        `  curl -s ${url}/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"${engines[0]!.options.modelName}","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}'`,
        `  curl -sN ${url}/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"${engines[0]!.options.modelName}","messages":[{"role":"user","content":"hello there"}],"max_tokens":16,"stream":true}'`,
        `  curl -s ${url}/busy_threshold`,
        `  ./bin/dynamo-sidecar load --openai ${url} --concurrency 64 --duration-s 20    # overload it: watch the 529s`,
        '',
      ].join('\n'),
    );
  } catch (err) {
    await stopAll();
    return exitWithError(io, VOICE, `cannot start: ${(err as Error).message}`);
  }
  const status = flags.quiet
    ? undefined
    : setInterval(() => {
        const parts = sidecars.map((s, i) => `w${i + 1} engine ${s.gate.inEngine} queue ${s.gate.queued} rejected ${s.counters().rejected}`);
        const busy = [...frontend.router.busySummary().values()].reduce((n, m) => n + m.busy, 0);
        io.stdout.write(`demo: ${parts.join(' | ')} | busy workers ${busy}\n`);
      }, DEMO_DEFAULTS.statusIntervalMs);
  const signal = await signalReceived;
  clearInterval(status);
  onFirstSignal(io, () => io.exit(1));
  io.stdout.write(`dynamo-sidecar demo: ${signal}: stopping\n`);
  await stopAll();
  io.exit(0);
}
