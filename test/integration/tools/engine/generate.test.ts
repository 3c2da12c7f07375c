// A client generated from proto/vllm/vllm_engine.proto talks to the simulated engine over real gRPC.
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateCompleteMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { engineClient, generate, healthClient, startGenerate, tokens, unary, type GenerateOutcome } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

let engine: RunningEngine;
let client: grpc.Client;
let health: grpc.Client;

beforeAll(async () => {
  engine = await startSimulatedEngine({ decodeStepMs: 2, numGpuBlocks: 256, blockSize: 16, seed: 7, modelName: 'sim-a' });
  client = engineClient(engine.address);
  health = healthClient(engine.address);
});

/** The complete message a call ended with; fails the test when there is none. */
function completeOf(out: GenerateOutcome): GenerateCompleteMessage {
  const complete = out.messages.at(-1)?.complete;
  if (!complete) throw new Error(`the call ended without a complete message: ${JSON.stringify(out)}`);
  return complete;
}

afterAll(async () => {
  client?.close();
  health?.close();
  await engine?.close();
});

describe('Generate', () => {
  it("streams one chunk per token then a complete repeating the last chunk, with vLLM's per-message counters (DELTA output)", async () => {
    const out = await generate(client, { request_id: 'r1', tokenized: { input_ids: tokens(40) }, sampling_params: { max_tokens: 12 }, stream: true });
    expect(out.code).toBe(0);
    const chunks = out.messages.flatMap((m) => (m.response === 'chunk' && m.chunk ? [m.chunk] : []));
    expect(out.messages.at(-1)?.response).toBe('complete');
    expect(out.messages.filter((m) => m.response === 'complete')).toHaveLength(1);
    const streamed = chunks.flatMap((c) => c.token_ids);
    expect(streamed).toHaveLength(12);
    const complete = completeOf(out);
    // As SMG's vLLM servicer streams: the complete carries the last chunk again, and each
    // message's completion_tokens counts its own ids.
    expect(complete.output_ids).toEqual(chunks.at(-1)!.token_ids);
    expect(complete.completion_tokens).toBe(1);
    expect(complete.prompt_tokens).toBe(40);
    expect(complete.finish_reason).toBe('length');
    expect(chunks.map((c) => c.completion_tokens)).toEqual(chunks.map((c) => c.token_ids.length));
  });

  it('sends only the complete message when stream is false', async () => {
    const out = await generate(client, { request_id: 'r2', text: 'the quick brown fox', sampling_params: { max_tokens: 5 }, stream: false });
    expect(out.code).toBe(0);
    expect(out.messages).toHaveLength(1);
    expect(out.messages[0]!.complete).toMatchObject({ prompt_tokens: 4, completion_tokens: 5, finish_reason: 'length' });
    expect(completeOf(out).output_ids).toHaveLength(5);
  });

  it('generates the same token ids for the same prompt and seed, whatever the request id', async () => {
    const request = (id: string) => ({ request_id: id, tokenized: { input_ids: tokens(20, 100) }, sampling_params: { max_tokens: 8 }, stream: false });
    const [a, b] = await Promise.all([generate(client, request('x')), generate(client, request('y'))]);
    expect(completeOf(a).output_ids).toEqual(completeOf(b).output_ids);
  });

  it('clamps a missing max_tokens to --max-output-tokens', async () => {
    const small = await startSimulatedEngine({ decodeStepMs: 1, maxOutputTokens: 3 });
    const c = engineClient(small.address);
    try {
      const out = await generate(c, { request_id: 'r', text: 'a b', stream: false });
      expect(completeOf(out).completion_tokens).toBe(3);
    } finally {
      c.close();
      await small.close();
    }
  });
});

describe('management RPCs', () => {
  it('HealthCheck answers healthy', async () => {
    expect(await unary(client, 'HealthCheck')).toMatchObject({ healthy: true });
  });

  it('grpc.health.v1 Check answers SERVING for the server and for VllmEngine, NOT_FOUND for others', async () => {
    expect(await unary(health, 'Check', { service: '' })).toEqual({ status: 'SERVING' });
    expect(await unary(health, 'Check', { service: 'vllm.grpc.engine.VllmEngine' })).toEqual({ status: 'SERVING' });
    await expect(unary(health, 'Check', { service: 'nope' })).rejects.toMatchObject({ code: 5 });
  });

  it('GetModelInfo reports the model name and KV geometry', async () => {
    const info = await unary(client, 'GetModelInfo');
    expect(info).toMatchObject({ model_path: 'sim-a', is_generation: true, max_context_length: 256 * 16, num_gpu_blocks: 256, block_size: 16 });
  });

  it('GetServerInfo.active_requests reflects the calls in flight', async () => {
    const slow = await startSimulatedEngine({ decodeStepMs: 50 });
    const c = engineClient(slow.address);
    try {
      expect(await unary(c, 'GetServerInfo')).toMatchObject({ active_requests: 0 });
      const calls = [1, 2, 3].map((i) => startGenerate(c, { request_id: `s${i}`, text: 'hello there', sampling_params: { max_tokens: 1000 }, stream: true }));
      for (const call of calls) call.on('error', () => {});
      await waitFor(async () => (await unary<{ active_requests: number }>(c, 'GetServerInfo')).active_requests === 3, 'three active', 5000);
      calls[0]!.cancel();
      await waitFor(async () => (await unary<{ active_requests: number }>(c, 'GetServerInfo')).active_requests === 2, 'two active', 5000);
      for (const call of calls) call.cancel();
      await waitFor(async () => (await unary<{ active_requests: number }>(c, 'GetServerInfo')).active_requests === 0, 'none active', 5000);
    } finally {
      c.close();
      await slow.close();
    }
  });
});

describe('shutdown', () => {
  it('ends in-flight calls with UNAVAILABLE and closes promptly', async () => {
    const e = await startSimulatedEngine({ decodeStepMs: 50 });
    const c = engineClient(e.address);
    try {
      const pending = generate(c, { request_id: 'z', text: 'long one', sampling_params: { max_tokens: 1000 } });
      await waitFor(() => e.stats().running === 1, 'running', 5000);
      const started = Date.now();
      await e.close();
      expect(Date.now() - started).toBeLessThan(1500);
      expect((await pending).code).toBe(14);
      expect(e.stats()).toMatchObject({ running: 0, usedBlocks: 0 });
    } finally {
      c.close();
      await e.close();
    }
  });
});
