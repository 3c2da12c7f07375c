/**
 * The simulated vLLM engine: a gRPC server speaking vllm.grpc.engine.VllmEngine, backed by a
 * continuous-batching scheduler with a paged KV cache, and a Prometheus endpoint with vLLM's
 * metric names. Used as the upstream in tests and benchmarks and by `dynamo-sidecar engine`.
 */
import { formatHostPort } from '../../platform/config/host-port.js';
import { createEngineRegistry, startMetricsServer } from './metrics-endpoint.js';
import { EngineServer } from './engine-server.js';
import type { EngineOptions } from './options.js';
import { resolveEngineOptions } from './options.js';
import { Scheduler } from './scheduler.js';

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
  stats(): EngineStats;
  /** Ends in-flight calls with UNAVAILABLE, stops the step timer and both servers. Idempotent. */
  close(): Promise<void>;
}

/** Validates options (throws ConfigError) and starts both servers. */
export async function startSimulatedEngine(overrides: Partial<EngineOptions> = {}): Promise<RunningEngine> {
  const options = resolveEngineOptions(overrides);
  const scheduler = new Scheduler(options);
  const registry = createEngineRegistry({ ...options, stats: () => scheduler.stats() });
  const server = new EngineServer({ options, scheduler });
  let grpcPort: number;
  try {
    grpcPort = await server.bind(options.host, options.port);
  } catch (error) {
    scheduler.close();
    await server.close(0);
    throw error;
  }
  let metrics;
  try {
    metrics = await startMetricsServer(registry, options.host, options.metricsPort);
  } catch (error) {
    scheduler.close();
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
    stats() {
      const s = scheduler.stats();
      return { running: s.running, waiting: s.waiting, usedBlocks: s.usedBlocks, totalBlocks: s.totalBlocks, generatedTokens: s.generatedTokens };
    },
    close() {
      closing ??= (async () => {
        await server.close();
        scheduler.close();
        await metrics.close();
      })();
      return closing;
    },
  };
}
