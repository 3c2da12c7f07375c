/**
 * What reading the engine's load and publishing it costs (issue: engine compatibility):
 * GetLoads over one HTTP/2 session vs a /metrics scrape of the same simulated engine (2 dp
 * ranks), and the size and encode time of one load event as JSON vs Dynamo's MessagePack
 * envelope. Run: `node --import tsx bench/load-sources.ts [--reads N]`; prints one line per figure.
 */
import { connect } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { activeLoadOf, encodeDynamoEnvelope } from '../src/protocol/dynamo-event.js';
import type { LoadEvent } from '../src/protocol/load-event.js';
import { getLoadsReader } from '../src/sidecar/load/engine-get-loads.js';
import { startSimulatedEngine } from '../src/tools/engine/index.js';

const { values } = parseArgs({ options: { reads: { type: 'string', default: '500' } } });
const reads = Number(values.reads);
const WARMUP = 20;

function percentiles(samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number): string => sorted[Math.floor(p * (sorted.length - 1))]!.toFixed(3);
  return `p50 ${at(0.5)} ms, p90 ${at(0.9)} ms, p99 ${at(0.99)} ms (n=${sorted.length})`;
}

async function timed(n: number, once: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n + WARMUP; i++) {
    const start = performance.now();
    await once();
    if (i >= WARMUP) samples.push(performance.now() - start);
  }
  return samples;
}

const engine = await startSimulatedEngine({ dataParallelSize: 2, host: '127.0.0.1', port: 0, metricsPort: 0 });
const session = connect(`http://${engine.address}`);
try {
  const read = getLoadsReader({ open: (headers) => session.request(headers), wire: 'vllm', kvBlockSize: 16, kvTotalBlocks: () => undefined, timeoutMs: 2000 });
  console.log(`node ${process.version}`);
  console.log(`GetLoads read, 2 ranks, one h2 session: ${percentiles(await timed(reads, () => read(new AbortController().signal)))}`);
  console.log(`/metrics scrape of the same engine:     ${percentiles(await timed(reads, async () => (await fetch(engine.metricsUrl)).text()))}`);

  const event: LoadEvent = {
    worker_id: 2478115510061606,
    dp_rank: 0,
    active_decode_blocks: 12,
    active_prefill_tokens: 512,
    kv_used_blocks: 40,
    kv_total_blocks: 2048,
    max_num_batched_tokens: 8192,
    engine_request: 32,
    request_queue: 16,
    engine_request_limit: 32,
    overloaded: true,
    overloaded_priority: null,
    overloaded_tenants: null,
    draining: false,
    timestamp_ms: Date.now(),
    sequence: 42,
    model: 'meta-llama/Llama-3.1-8B-Instruct',
    grpc_address: '10.0.0.5:50050',
    heartbeat_ms: 1000,
    predicted_ttft_ms: 180,
  };
  const header = (sequence: number) => ({ publisherId: 123456789012345, sequence, publishedAtMs: Date.now(), topic: 'kv_metrics' });
  const json = Buffer.from(JSON.stringify(event));
  const envelope = encodeDynamoEnvelope(header(0), activeLoadOf(event));
  console.log(`event size: json ${json.length} B, dynamo envelope ${envelope.length} B`);
  const N = 100_000;
  let start = performance.now();
  for (let i = 0; i < N; i++) encodeDynamoEnvelope(header(i), activeLoadOf(event));
  const dynamoUs = ((performance.now() - start) * 1000) / N;
  start = performance.now();
  for (let i = 0; i < N; i++) Buffer.from(JSON.stringify({ ...event, sequence: i }));
  const jsonUs = ((performance.now() - start) * 1000) / N;
  console.log(`encode per event (${N}): dynamo ${dynamoUs.toFixed(2)} us, json ${jsonUs.toFixed(2)} us`);
} finally {
  session.close();
  await engine.close();
}
