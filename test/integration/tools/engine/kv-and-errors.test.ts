// KV accounting seen from outside (/metrics, stats), bad requests and deadlines.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { rawCall } from '../../../support/raw-grpc.js';
import { engineClient, generate, metricValue, startGenerate, tokens, VllmEngineClient } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

const metrics = async (engine: RunningEngine): Promise<string> => (await fetch(engine.metricsUrl)).text();
const wasted = (body: string, reason: string): number =>
  Number(new RegExp(`^dynamo_sim_engine_wasted_tokens_total\\{[^}]*reason="${reason}"[^}]*\\} (\\S+)$`, 'm').exec(body)?.[1] ?? NaN);

describe('KV cache with 100 blocks of 16 tokens', () => {
  let engine: RunningEngine;
  let client: grpc.Client;
  const calls: grpc.ClientReadableStream<unknown>[] = [];

  beforeAll(async () => {
    // Slow decode keeps sequences resident; 30 blocks per prompt means three fit and a fourth waits.
    engine = await startSimulatedEngine({ numGpuBlocks: 100, blockSize: 16, decodeStepMs: 200, modelName: 'kv-test' });
    client = engineClient(engine.address);
  });

  afterAll(async () => {
    for (const call of calls) call.cancel();
    client?.close();
    await engine?.close();
  });

  it('makes requests that do not fit wait and reports usage as held blocks / total', async () => {
    // Three prompts of 480 tokens (30 blocks each) fit; a fourth of 960 (60 blocks) must wait.
    for (let i = 0; i < 4; i++) {
      const prompt = tokens(i < 3 ? 480 : 960, i * 1000 + 1);
      const call = startGenerate(client, { request_id: `kv${i}`, tokenized: { input_ids: prompt }, sampling_params: { max_tokens: 200 }, stream: true });
      call.on('error', () => {});
      calls.push(call);
    }
    // Admission happens at step boundaries; the first prefill step is about 10 ms.
    await waitFor(() => engine.stats().running === 3 && engine.stats().waiting === 1, 'three running, one waiting', 5000);
    const stats = engine.stats();
    expect(stats).toMatchObject({ running: 3, waiting: 1, totalBlocks: 100 });
    // 480 prompt tokens = 30 blocks each, plus one block once a sequence crosses 480 tokens.
    expect(stats.usedBlocks).toBeGreaterThanOrEqual(90);
    expect(stats.usedBlocks).toBeLessThanOrEqual(93);
    const body = await metrics(engine);
    const usage = metricValue(body, 'vllm:kv_cache_usage_perc')!;
    expect(usage * 100).toBeCloseTo(engine.stats().usedBlocks, 6);
    expect(metricValue(body, 'vllm:num_requests_waiting')).toBe(1);
    expect(metricValue(body, 'vllm:num_requests_running')).toBe(3);
    expect(body).toMatch(/vllm:cache_config_info\{[^}]*num_gpu_blocks="100"[^}]*\} 1/);
    expect(body).toMatch(/vllm:cache_config_info\{[^}]*block_size="16"[^}]*\} 1/);
    // One dp rank: its series carry engine="0", as vLLM v1's do.
    expect(body).toMatch(/vllm:kv_cache_usage_perc\{model_name="kv-test",engine="0"\}/);
  });

  it("frees a cancelled call's blocks at once and admits the waiting one when enough are free", async () => {
    // Each running sequence holds 30 prompt blocks plus one per 16 tokens decoded so far, so the
    // total keeps moving while we watch: judge by bounds that hold whatever was decoded.
    // 3 running hold >= 90; 2 running hold 60..86 (at most 200 output tokens = 13 blocks each).
    calls[0]!.cancel();
    await waitFor(() => engine.stats().running === 2 && engine.stats().usedBlocks <= 86, 'the cancelled call to leave with its blocks', 5000);
    // Its 480 prefilled tokens at least, plus what it generated; nothing under the other reasons.
    const body = await metrics(engine);
    expect(wasted(body, 'cancelled')).toBeGreaterThanOrEqual(480);
    expect([wasted(body, 'deadline'), wasted(body, 'preempted')]).toEqual([0, 0]);
    const afterCancel = engine.stats();
    expect(afterCancel.usedBlocks).toBeGreaterThanOrEqual(60);
    // At most 40 blocks are free and kv3 needs 60: it keeps waiting.
    expect(afterCancel.waiting).toBe(1);
    calls[1]!.cancel();
    // One sequence remains, holding 30 + (tokens decoded)/16 blocks: under 160 tokens (32 s of
    // 200 ms steps, far longer than this test) 60 are free and kv3 is admitted at the next step.
    await waitFor(() => engine.stats().waiting === 0 && engine.stats().running === 2, 'waiting admitted', 5000);
    expect(engine.stats().usedBlocks).toBeGreaterThanOrEqual(90);
  });
});

describe('bad requests and deadlines', () => {
  let engine: RunningEngine;
  let client: grpc.Client;

  beforeAll(async () => {
    engine = await startSimulatedEngine({ numGpuBlocks: 10, blockSize: 16, decodeStepMs: 20 });
    client = engineClient(engine.address);
  });

  afterAll(async () => {
    client?.close();
    await engine?.close();
  });

  it.each([
    ['no prompt at all', { request_id: 'a' }, /prompt is empty/],
    ['a blank text prompt', { request_id: 'a', text: '   ' }, /prompt is empty/],
    ['max_tokens 0', { request_id: 'a', text: 'hi', sampling_params: { max_tokens: 0 } }, /max_tokens must be at least 1/],
    ['a prompt longer than the KV cache', { request_id: 'a', tokenized: { input_ids: tokens(161) } }, /maximum context length is 160/],
    [
      'prompt + max_tokens beyond the context',
      { request_id: 'a', tokenized: { input_ids: tokens(100) }, sampling_params: { max_tokens: 61 } },
      /160 tokens, but 100 prompt tokens \+ 61/,
    ],
    ['n > 1', { request_id: 'a', text: 'hi', sampling_params: { n: 2 } }, /n = 2 is not supported/],
  ])('answers INVALID_ARGUMENT for %s', async (_name, request, message) => {
    const out = await generate(client, request);
    expect(out.code).toBe(3);
    expect(out.details).toMatch(message);
    expect(engine.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
  });

  it('ends a call at its deadline with DEADLINE_EXCEEDED and frees its blocks', async () => {
    // The deadline goes on the wire as grpc-timeout from a bare HTTP/2 client, so only the engine
    // enforces it. A grpc-js client would give up at its own deadline, which passes before the
    // engine's (the engine counts the 1 s from when the request reached it): its RST_STREAM then
    // reaches the engine as a cancel within the deadline, and the work counted as cancelled.
    // 150 tokens at 20 ms a step take 3 s, so the call cannot finish within its 1 s; the first
    // step (the prefill) runs at once, so there is work for the deadline to waste.
    const generateMethod = VllmEngineClient.service['Generate']!;
    const request = generateMethod.requestSerialize({ request_id: 'd', text: 'slow one', sampling_params: { max_tokens: 150 }, stream: true });
    const { session, stream } = rawCall(engine.address, generateMethod.path, { 'grpc-timeout': '1000m' }, request);
    stream.on('data', () => {});
    const status = await new Promise<Record<string, unknown>>((resolve) =>
      stream.on('response', (headers) => (headers['grpc-status'] !== undefined ? resolve(headers) : stream.on('trailers', resolve))),
    );
    session.close();
    expect(status['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    await waitFor(() => engine.stats().usedBlocks === 0 && engine.stats().running === 0, 'blocks freed', 5000);
    // Whichever ends the call at the deadline, grpc-js's own timer or the engine's, the work counts as deadline.
    const body = await metrics(engine);
    expect(wasted(body, 'deadline')).toBeGreaterThan(0);
    expect(wasted(body, 'cancelled')).toBe(0);
  });
});
