/**
 * Admission by work (--ttft-slo-ms) against the real sidecar and the simulated engine: the
 * sidecar learns the engine's prefill rate from first tokens, refuses at once a call whose
 * predicted TTFT cannot meet the SLO, holds a call whose KV blocks do not fit until blocks come
 * back, shows what it learned on GET /load and /metrics, and leaves its ledger at zero once every
 * call has ended. Bad values of the flag exit 2 naming it.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { runCli, startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { engineClient, streamTokens } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';

interface WorkView {
  prefill_tokens_per_s: number | null;
  prefill_samples: number;
  ranks: { prefill_tokens_ahead: number; kv_reserved_blocks: number; kv_queued_blocks: number; kv_free_blocks: number | null }[];
}

const started: { stop(): Promise<unknown> }[] = [];
const clients: grpc.Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of started.splice(0).reverse()) await s.stop();
});

async function sidecar(engine: RunningEngine, args: string[]): Promise<{ s: SidecarProcess; client: grpc.Client; work: () => Promise<WorkView> }> {
  const s = await startSidecarProcess(['--upstream', engine.address, '--engine-metrics-url', engine.metricsUrl, ...args]);
  started.push(s);
  const client = engineClient(s.address);
  clients.push(client);
  const work = async (): Promise<WorkView> => (JSON.parse((await s.get('/load')).body) as { admission_by_work: WorkView }).admission_by_work;
  // The engine's geometry (its KV blocks) is known once discovery or the first scrape has told it.
  await waitFor(async () => (await work()).ranks[0]?.kv_free_blocks !== null, 'the sidecar to know the KV cache');
  return { s, client, work };
}

describe('--ttft-slo-ms', () => {
  let engine: RunningEngine;
  beforeAll(async () => {
    // 64 blocks of 16 tokens; 1,000 prefill tokens/s: an 800-token prompt takes about 800 ms to its first token.
    engine = await startSimulatedEngine({
      host: '127.0.0.1',
      port: 0,
      metricsPort: 0,
      numGpuBlocks: 64,
      blockSize: 16,
      prefillTokensPerS: 1000,
      decodeStepMs: 10,
    });
  });
  afterAll(async () => {
    await engine?.close();
  });

  it('learns the prefill rate, refuses at once what cannot meet the SLO (with the predicted wait as pushback), and leaks nothing', async () => {
    const { s, client, work } = await sidecar(engine, ['--ttft-slo-ms', '300']);
    // One call at a time, of several sizes: the prefill model's first points. A call with nothing
    // ahead of it is never refused by prediction, whatever the model says.
    for (const [i, size] of [100, 300, 500, 200, 600, 400].entries())
      expect((await streamTokens(client, `teach-${i}`, size, 2).ended).code).toBe(grpc.status.OK);
    const taught = await work();
    expect(taught.prefill_samples).toBeGreaterThanOrEqual(6);
    expect(taught.prefill_tokens_per_s, "a rate near the engine's 1,000 tokens/s").toBeGreaterThan(250);
    expect(await s.metric('dynamo_sidecar_prefill_tokens_per_second')).toBeGreaterThan(250);

    // An 800-token prompt in prefill, and a 100-token one behind it: predicted at about 900 ms, over 300.
    const long = streamTokens(client, 'long', 800, 2);
    await waitFor(async () => ((await work()).ranks[0]?.prefill_tokens_ahead ?? 0) >= 800, 'the long prompt in prefill');
    const behind = await streamTokens(client, 'behind', 100, 2).ended;
    expect(behind.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(Number(behind.pushbackMs), 'the pushback is the predicted wait').toBeGreaterThan(0);
    expect(await s.metric('dynamo_sidecar_rejections_total', 'reason="predicted_ttft"')).toBe(1);
    expect((await long.ended).code).toBe(grpc.status.OK);

    // Every call has ended: the ledger is back at zero.
    const after = await work();
    expect(after.ranks[0]).toMatchObject({ prefill_tokens_ahead: 0, kv_reserved_blocks: 0, kv_queued_blocks: 0 });
    expect(await s.metric('dynamo_sidecar_kv_reserved_blocks', 'dp_rank="0"')).toBe(0);
  });

  it('holds a call whose KV blocks do not fit beside those reserved, until they come back', async () => {
    const { s, client, work } = await sidecar(engine, ['--ttft-slo-ms', '60000']);
    // 16 + 600 tokens: 39 of the 64 blocks each, so two cannot be in the engine at once.
    const first = streamTokens(client, 'first', 16, 600);
    await waitFor(async () => (await s.metric('dynamo_engine_request')) === 1, 'the first call in the engine');
    const second = streamTokens(client, 'second', 16, 600);
    await waitFor(async () => (await s.metric('dynamo_request_queue')) === 1, 'the second call held in the queue');
    expect(await s.metric('dynamo_engine_request'), 'although a slot is free').toBe(1);
    expect((await work()).ranks[0]!.kv_reserved_blocks).toBe(39);
    expect((await first.ended).code).toBe(grpc.status.OK);
    expect((await second.ended).code).toBe(grpc.status.OK);
    expect((await work()).ranks[0]).toMatchObject({ kv_reserved_blocks: 0, kv_queued_blocks: 0 });
  });
});

describe('--ttft-slo-ms bad values', () => {
  it.each([['0'], ['-5'], ['NaN'], ['86400001'], ['1.5']])('exits 2 naming the flag for %s', async (value) => {
    const result = await runCli(['--ttft-slo-ms', value]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--ttft-slo-ms');
  });

  it('exits 2 naming the environment variable', async () => {
    const result = await runCli([], { DYN_SIDECAR_TTFT_SLO_MS: 'soon' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('DYN_SIDECAR_TTFT_SLO_MS');
  });
});
