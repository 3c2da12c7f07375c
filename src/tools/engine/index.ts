/**
 * The simulated vLLM engine: a gRPC server speaking vllm.grpc.engine.VllmEngine, backed by one
 * continuous-batching scheduler with a paged KV cache per data-parallel rank, and a Prometheus
 * endpoint with vLLM's metric names (per rank, `engine` label). Used as the upstream in tests and
 * benchmarks and by `dynamo-sidecar engine`.
 */
import { formatHostPort } from '../../platform/config/host-port.js';
import { createEngineRegistry, startMetricsServer } from './metrics-endpoint.js';
import { EngineCore } from './engine-core.js';
import { EngineServer } from './engine-server.js';
import type { EngineOptions } from './options.js';
import { resolveEngineOptions } from './options.js';
import type { SchedulerStats } from './scheduler.js';

export type { EngineOptions } from './options.js';

export interface EngineStats {
  running: number;
  waiting: number;
  usedBlocks: number;
  totalBlocks: number;
  generatedTokens: number;
}

export interface RunningEngine {
  readonly grpcPort: number;
  readonly metricsPort: number;
  /** "host:port" of the gRPC server, ready for a grpc-js client. */
  readonly address: string;
  /** "http://host:port/metrics". */
  readonly metricsUrl: string;
  readonly options: EngineOptions;
  /** Summed over the dp ranks. */
  stats(): EngineStats;
  /** One entry per dp rank, index = rank. */
  rankStats(): EngineStats[];
  /** Ends in-flight calls with UNAVAILABLE, stops the step timer and both servers. Idempotent. */
  close(): Promise<void>;
}

function engineStats(s: SchedulerStats): EngineStats {
  return { running: s.running, waiting: s.waiting, usedBlocks: s.usedBlocks, totalBlocks: s.totalBlocks, generatedTokens: s.generatedTokens };
}

/** Validates options (throws ConfigError) and starts both servers. */
export async function startSimulatedEngine(overrides: Partial<EngineOptions> = {}): Promise<RunningEngine> {
  const options = resolveEngineOptions(overrides);
  const core = new EngineCore(options);
  const registry = createEngineRegistry({ ...options, rankStats: () => core.rankStats() });
  const server = new EngineServer({ options, core });
  let grpcPort: number;
  try {
    grpcPort = await server.bind(options.host, options.port);
  } catch (error) {
    core.close();
    await server.close(0);
    throw error;
  }
  let metrics;
  try {
    metrics = await startMetricsServer(registry, options.host, options.metricsPort);
  } catch (error) {
    core.close();
    await server.close(0);
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    grpcPort,
    metricsPort: metrics.port,
    address: formatHostPort({ host: options.host, port: grpcPort }),
    metricsUrl: `http://${formatHostPort({ host: options.host, port: metrics.port })}/metrics`,
    options,
    stats: () => engineStats(core.stats()),
    rankStats: () => core.rankStats().map(engineStats),
    close() {
      closing ??= (async () => {
        await server.close();
        core.close();
        await metrics.close();
      })();
      return closing;
    },
  };
}
