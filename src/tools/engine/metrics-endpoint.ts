/**
 * The simulated engine's Prometheus endpoint, with vLLM's metric names so that the sidecar's
 * scraper (src/sidecar/load/engine-metrics-reader.ts) reads it exactly as it reads a real vLLM.
 * Per-rank series carry vLLM's `engine` label (the dp rank, "0", "1", ...; also with one rank, as
 * vLLM v1 does); `vllm:cache_config_info` appears once, unlabelled, since every rank has the same
 * geometry. Values are read at scrape time from each rank's scheduler: nothing is updated on the
 * token path. Uses its own Registry: several engines (and the sidecar) can share one process in tests.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';
import type { SchedulerStats } from './scheduler.js';

export interface EngineMetricsSource {
  readonly modelName: string;
  readonly numGpuBlocks: number;
  readonly blockSize: number;
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  /** One entry per dp rank, index = rank. */
  rankStats(): readonly SchedulerStats[];
}

export function createEngineRegistry(source: EngineMetricsSource): Registry {
  const registry = new Registry();
  const model = { model_name: source.modelName };
  new Gauge({
    name: 'vllm:cache_config_info',
    help: 'Information of the KV cache configuration (value is always 1).',
    labelNames: ['model_name', 'num_gpu_blocks', 'block_size', 'max_num_seqs', 'max_num_batched_tokens'],
    registers: [registry],
  }).set(
    {
      ...model,
      num_gpu_blocks: String(source.numGpuBlocks),
      block_size: String(source.blockSize),
      max_num_seqs: String(source.maxNumSeqs),
      max_num_batched_tokens: String(source.maxNumBatchedTokens),
    },
    1,
  );
  const perRank = (read: (s: SchedulerStats) => number): [Record<'model_name' | 'engine', string>, number][] =>
    source.rankStats().map((s, rank) => [{ ...model, engine: String(rank) }, read(s)]);
  const gauge = (name: string, help: string, read: (s: SchedulerStats) => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['model_name', 'engine'],
      registers: [registry],
      collect() {
        for (const [labels, value] of perRank(read)) this.set(labels, value);
      },
    });
  };
  gauge('vllm:kv_cache_usage_perc', 'KV-cache usage, 0..1: blocks held by running sequences / total blocks.', (s) =>
    s.totalBlocks === 0 ? 0 : s.usedBlocks / s.totalBlocks,
  );
  gauge('vllm:num_requests_running', 'Number of requests in the running set.', (s) => s.running);
  gauge('vllm:num_requests_waiting', 'Number of requests waiting to be scheduled.', (s) => s.waiting);
  // Counters mirror totals the scheduler already keeps; reset() + inc() sets them at scrape.
  const counter = (name: string, help: string, read: (s: SchedulerStats) => number): void => {
    new Counter({
      name,
      help,
      labelNames: ['model_name', 'engine'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [labels, value] of perRank(read)) this.inc(labels, value);
      },
    });
  };
  counter('vllm:generation_tokens_total', 'Number of generated tokens.', (s) => s.generatedTokens);
  counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed (recomputation included).', (s) => s.prefilledTokens);
  counter('vllm:num_preemptions_total', 'Cumulative number of preemptions.', (s) => s.preemptions);
  // Not a vLLM series (vLLM has none for this): the simulator's own, for the overload sweep.
  new Counter({
    name: 'dynamo_sim_engine_wasted_tokens_total',
    help: 'Prefill tokens computed plus tokens generated since last admitted, thrown away by a client cancel or Abort (cancelled), a gRPC deadline (deadline) or a KV preemption (preempted, recomputed on resume).',
    labelNames: ['model_name', 'engine', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      source.rankStats().forEach((s, rank) => {
        const labels = { ...model, engine: String(rank) };
        this.inc({ ...labels, reason: 'cancelled' }, s.wastedCancelledTokens);
        this.inc({ ...labels, reason: 'deadline' }, s.wastedDeadlineTokens);
        this.inc({ ...labels, reason: 'preempted' }, s.wastedPreemptedTokens);
      });
    },
  });
  return registry;
}

export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` on host:port (0 = a free port); anything else is 404. */
export async function startMetricsServer(registry: Registry, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (error: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
