// Abort, GetLoads and data parallelism over real gRPC, with a client generated from
// proto/vllm/vllm_engine.proto.
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import type { GenerateResponseMessage, GetLoadsResponseMessage, SchedulerLoadMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { parseEngineMetrics } from '../../../../src/sidecar/load/engine-metrics-reader.js';
import { startSimulatedEngine, type EngineOptions, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { engineClient, generate, startGenerate, tokens, unary } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

let engine: RunningEngine | undefined;
let client: grpc.Client | undefined;
const open: grpc.ClientReadableStream<unknown>[] = [];

async function start(options: Partial<EngineOptions>): Promise<{ engine: RunningEngine; client: grpc.Client }> {
  engine = await startSimulatedEngine({ numGpuBlocks: 64, blockSize: 16, ...options });
  client = engineClient(engine.address);
  return { engine, client };
}

afterEach(async () => {
  for (const call of open.splice(0)) call.cancel();
  client?.close();
  await engine?.close();
  client = undefined;
  engine = undefined;
});

interface Watched {
  readonly messages: GenerateResponseMessage[];
  readonly status: Promise<grpc.StatusObject>;
}

/** Starts a Generate call left running, collecting its messages; cancelled in afterEach if still open. */
function watch(c: grpc.Client, request: Record<string, unknown>, metadata?: grpc.Metadata): Watched {
  const call = metadata
    ? (c as unknown as { Generate: (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<unknown> }).Generate(request, metadata)
    : startGenerate(c, request);
  open.push(call);
  const messages: GenerateResponseMessage[] = [];
  call.on('data', (m: GenerateResponseMessage) => messages.push(m));
  call.on('error', () => {});
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  return { messages, status };
}

const loads = (c: grpc.Client, request: { dp_rank?: number } = {}) => unary<GetLoadsResponseMessage>(c, 'GetLoads', request);
const rankLoad = async (c: grpc.Client, rank: number): Promise<SchedulerLoadMessage> => (await loads(c, { dp_rank: rank })).loads[0]!;

describe('Abort', () => {
  it('ends a stream mid-way as vLLM does (an empty chunk, then a complete with finish_reason "abort" repeating it) then OK, and frees its blocks', async () => {
    const { engine, client } = await start({ decodeStepMs: 20 });
    // 40 + 900 tokens fit the 64 * 16 token context.
    const call = watch(client, { request_id: 'ab', tokenized: { input_ids: tokens(40) }, sampling_params: { max_tokens: 900 }, stream: true });
    await waitFor(() => call.messages.length >= 3, 'three chunks');
    expect((await rankLoad(client, 0)).num_running_reqs).toBe(1);
    expect(await unary(client, 'Abort', { request_ids: ['ab'] })).toEqual({});
    const status = await call.status;
    expect(status.code).toBe(grpc.status.OK);
    const last = call.messages.at(-1)!;
    expect(last.response).toBe('complete');
    const streamed = call.messages.flatMap((m) => m.chunk?.token_ids ?? []);
    expect(call.messages.slice(0, -1).every((m) => m.response === 'chunk')).toBe(true);
    expect(call.messages.at(-2)?.chunk).toMatchObject({ token_ids: [], completion_tokens: 0 });
    expect(last.complete).toMatchObject({ finish_reason: 'abort', output_ids: [], completion_tokens: 0, prompt_tokens: 40 });
    expect(streamed.length).toBeGreaterThanOrEqual(3);
    expect(streamed.length).toBeLessThan(900);
    expect(await rankLoad(client, 0)).toMatchObject({ num_running_reqs: 0, num_waiting_reqs: 0, num_total_reqs: 0, num_used_tokens: 0, token_usage: 0 });
    expect(engine.stats()).toMatchObject({ running: 0, usedBlocks: 0 });
  });

  it('ends a non-streaming call with the complete alone, and ignores ids it does not know', async () => {
    const { client } = await start({ decodeStepMs: 20 });
    const call = watch(client, { request_id: 'ns', text: 'a b c', sampling_params: { max_tokens: 1000 }, stream: false });
    await waitFor(async () => (await rankLoad(client, 0)).num_running_reqs === 1, 'the call running');
    await unary(client, 'Abort', { request_ids: ['unknown', 'also-unknown'] });
    expect((await rankLoad(client, 0)).num_running_reqs).toBe(1);
    await unary(client, 'Abort', { request_ids: ['ns'] });
    expect((await call.status).code).toBe(grpc.status.OK);
    expect(call.messages).toHaveLength(1);
    expect(call.messages[0]!.complete).toMatchObject({ finish_reason: 'abort', prompt_tokens: 3 });
  });

  it('aborts every call sharing the id, waiting ones included', async () => {
    const { client } = await start({ decodeStepMs: 20, maxNumSeqs: 1 });
    const calls = [1, 2, 3].map(() => watch(client, { request_id: 'same', text: 'x y', sampling_params: { max_tokens: 1000 }, stream: true }));
    const other = watch(client, { request_id: 'other', text: 'x y', sampling_params: { max_tokens: 1000 }, stream: true });
    await waitFor(async () => (await rankLoad(client, 0)).num_total_reqs === 4, 'four calls in the engine');
    await unary(client, 'Abort', { request_ids: ['same'] });
    for (const call of calls) {
      expect((await call.status).code).toBe(grpc.status.OK);
      expect(call.messages.at(-1)?.complete?.finish_reason).toBe('abort');
    }
    expect(await rankLoad(client, 0)).toMatchObject({ num_total_reqs: 1 });
    expect(other.messages.every((m) => m.response === 'chunk')).toBe(true);
  });
});

describe('GetLoads and --data-parallel-size 2', () => {
  // Decode steps of 10 s: a running call holds its 40 prompt tokens' 3 blocks (up to 48 tokens)
  // for the whole test.
  const options = { dataParallelSize: 2, decodeStepMs: 10_000 };
  const pinned = (id: string, rank?: number) => ({
    request_id: id,
    tokenized: { input_ids: tokens(40) },
    sampling_params: { max_tokens: 100 },
    stream: true,
    ...(rank === undefined ? {} : { data_parallel_rank: rank }),
  });

  it('reports every rank; calls pinned to rank 1 (field or x-data-parallel-rank) show up on rank 1 alone', async () => {
    const { engine, client } = await start(options);
    const idle = await loads(client);
    expect(idle).toMatchObject({ version: 'simulated', dp_rank_count: 2 });
    expect(new Date(idle.timestamp).toISOString()).toBe(idle.timestamp);
    expect(idle.loads.map((l) => l.dp_rank)).toEqual([0, 1]);
    const metadata = new grpc.Metadata();
    metadata.set('x-data-parallel-rank', '1');
    const calls = [watch(client, pinned('p1', 1)), watch(client, pinned('p2', 1)), watch(client, pinned('p3'), metadata)];
    await waitFor(() => engine.stats().running === 3, 'three calls running');
    const { loads: both } = await loads(client);
    expect(both[0]).toMatchObject({ dp_rank: 0, num_running_reqs: 0, num_waiting_reqs: 0, num_total_reqs: 0, num_used_tokens: 0, token_usage: 0 });
    expect(both[1]).toMatchObject({
      dp_rank: 1,
      num_running_reqs: 3,
      num_waiting_reqs: 0,
      num_total_reqs: 3,
      num_used_tokens: 3 * 3 * 16,
      max_total_num_tokens: 64 * 16,
      max_running_requests: 256,
    });
    expect(both[1]!.token_usage).toBeCloseTo(9 / 64, 9);
    expect(both[0]!.max_total_num_tokens).toBe(64 * 16);
    expect((await loads(client, { dp_rank: 1 })).loads).toEqual([both[1]]);
    expect(engine.rankStats().map((s) => s.usedBlocks)).toEqual([0, 9]);

    // The sidecar's reader finds each rank's blocks in the engine's /metrics.
    const scraped = parseEngineMetrics(await (await fetch(engine.metricsUrl)).text());
    expect(scraped.problems).toEqual([]);
    expect(scraped.ranks.get(0)).toMatchObject({ kvUsedBlocks: 0, kvTotalBlocks: 64, running: 0 });
    expect(scraped.ranks.get(1)).toMatchObject({ kvUsedBlocks: 9, kvTotalBlocks: 64, running: 3 });

    expect(await unary(client, 'GetServerInfo')).toMatchObject({
      data_parallel_size: 2,
      active_requests: 3,
      num_running: 3,
      kv_used_blocks: 9,
      kv_total_blocks: 128,
    });
    expect(await unary(client, 'GetModelInfo')).toMatchObject({ num_gpu_blocks: 64, max_num_seqs: 256 });

    await unary(client, 'Abort', { request_ids: ['p1', 'p2', 'p3'] });
    await Promise.all(calls.map((c) => c.status));
    expect((await rankLoad(client, 1)).num_used_tokens).toBe(0);
  });

  it('answers INVALID_ARGUMENT naming the rank for a GetLoads dp_rank or a Generate data_parallel_rank out of range', async () => {
    const { engine, client } = await start(options);
    await expect(loads(client, { dp_rank: 2 })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining('dp_rank 2') });
    const out = await generate(client, pinned('bad', 2));
    expect(out.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(out.details).toContain('data_parallel_rank 2');
    expect(out.messages).toEqual([]);
    const metadata = new grpc.Metadata();
    metadata.set('x-data-parallel-rank', '9');
    const viaHeader = watch(client, pinned('bad-header'), metadata);
    expect((await viaHeader.status).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(engine.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it('spreads unpinned calls over the ranks, least loaded first', async () => {
    const { engine, client } = await start(options);
    for (const id of ['u1', 'u2', 'u3', 'u4']) watch(client, pinned(id));
    await waitFor(() => engine.stats().running === 4, 'four calls running');
    expect(engine.rankStats().map((s) => s.running)).toEqual([2, 2]);
  });
});
