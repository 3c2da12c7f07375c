/**
 * --engine-load-source getloads end to end: the real sidecar process polls the simulated engine's
 * GetLoads (vllm.grpc.engine.VllmEngine, the current layout) over its own engine connection, and
 * the KV numbers it publishes for each dp rank are the engine's own. And `auto` in front of an
 * engine without GetLoads settles on no KV source, saying so once.
 */
import type * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import type { GetLoadsResponseMessage } from '../../../../src/protocol/engine/engine-proto.js';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { startSimulatedEngine } from '../../../../src/tools/engine/index.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine } from '../../../support/test-engine.js';
import { engineClient, startGenerate, tokens, unary } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';
import { runCleanups } from '../../../support/cleanups.js';

const cleanups: (() => unknown)[] = [];
afterAll(() => runCleanups(cleanups));

const BLOCK_SIZE = 16;
const POLL_MS = 100;

async function ranks(sidecar: SidecarProcess): Promise<LoadEvent[]> {
  const res = await sidecar.get('/load');
  return (JSON.parse(res.body) as { ranks: LoadEvent[] }).ranks;
}

/** The engine's own figures per rank, in blocks (it reports tokens: blocks * block size). */
async function engineBlocks(client: grpc.Client): Promise<{ used: number; total: number }[]> {
  const answer = await unary<GetLoadsResponseMessage>(client, 'GetLoads', {});
  return [...answer.loads]
    .sort((a, b) => a.dp_rank - b.dp_rank)
    .map((l) => ({ used: l.num_used_tokens / BLOCK_SIZE, total: l.max_total_num_tokens / BLOCK_SIZE }));
}

describe('sidecar --engine-load-source getloads', () => {
  it("publishes each rank's kv_used_blocks and kv_total_blocks as the engine's GetLoads reports them", async () => {
    // A long decode step keeps the held calls' blocks still once prefilled, so the figures can be compared.
    const engine = await startSimulatedEngine({ dataParallelSize: 2, numGpuBlocks: 256, blockSize: BLOCK_SIZE, decodeStepMs: 60_000 });
    cleanups.push(() => engine.close());
    const sidecar = await startSidecarProcess([
      '--upstream',
      engine.address,
      '--engine-load-source',
      'getloads',
      '--data-parallel-size',
      '2',
      '--kv-block-size',
      String(BLOCK_SIZE),
      '--scrape-interval-ms',
      String(POLL_MS),
    ]);
    cleanups.push(() => sidecar.stop('SIGKILL'));
    const direct = engineClient(engine.address);
    cleanups.push(() => direct.close());

    await waitFor(async () => (await ranks(sidecar)).every((r) => r.kv_total_blocks === 256 && r.kv_used_blocks === 0), 'both ranks idle: 0 of 256 blocks');
    expect(await sidecar.metric('dynamo_sidecar_engine_load_source', 'source="getloads"')).toBe(1);

    // Three calls pinned to rank 1 through the sidecar: 100 prompt tokens + 1 sampled = 7 blocks each.
    const viaSidecar = engineClient(sidecar.address);
    cleanups.push(() => viaSidecar.close());
    for (let i = 0; i < 3; i++) {
      const call = startGenerate(viaSidecar, {
        request_id: `g${i}`,
        tokenized: { input_ids: tokens(100) },
        sampling_params: { max_tokens: 500 },
        stream: true,
        data_parallel_rank: 1,
      });
      call.on('error', () => {});
      cleanups.push(() => call.cancel());
    }
    await waitFor(async () => (await engineBlocks(direct))[1]?.used === 21, "the engine's rank 1 holding the three calls' 21 blocks");
    const engineFigures = await engineBlocks(direct);
    expect(engineFigures).toEqual([
      { used: 0, total: 256 },
      { used: 21, total: 256 },
    ]);
    // Within a poll or so (bounded generously for a loaded machine), the sidecar publishes the same.
    await waitFor(
      async () => {
        const [r0, r1] = await ranks(sidecar);
        return r0?.kv_used_blocks === 0 && r1?.kv_used_blocks === 21 && r1.kv_total_blocks === 256;
      },
      "the sidecar's rank figures to match the engine's",
      5000,
    );
    // Traffic accounting sees the same calls on the same rank (the request's data_parallel_rank).
    const [r0, r1] = await ranks(sidecar);
    expect(r1).toMatchObject({ active_decode_blocks: 21, engine_request: 3 });
    expect(r0).toMatchObject({ active_decode_blocks: 0 });
  });

  it('auto, in front of an engine without GetLoads: no KV source, said once', async () => {
    const engine = await startTestEngine();
    cleanups.push(() => engine.close());
    const sidecar = await startSidecarProcess(['--upstream', engine.address, '--scrape-interval-ms', String(POLL_MS), '--served-model-name', 'm']);
    cleanups.push(() => sidecar.stop('SIGKILL'));
    await waitFor(async () => (await sidecar.metric('dynamo_sidecar_engine_load_source', 'source="traffic"')) === 1, 'the source to settle on traffic');
    expect((await ranks(sidecar))[0]).toMatchObject({ kv_used_blocks: null, kv_total_blocks: null });
    expect(sidecar.stderr().match(/engine load source unsupported/g)).toHaveLength(1);
    expect(await sidecar.metric('dynamo_sidecar_engine_scrape_stale')).toBe(1);
  });
});
