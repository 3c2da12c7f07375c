/**
 * Every engine protocol end to end: a real sidecar (--generate-wire) in front of the simulated
 * engine speaking it (--protocol), both real processes. The sidecar learns the engine's capacity
 * through that protocol's own RPCs (shown in /load, carried in load events, read by
 * --engine-request-limit auto), puts pinned calls on their dp rank, and counts exactly the output
 * tokens the engine says it generated.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateWire } from '../../../../src/protocol/engine/generate-wire.js';
import type { EngineProtocol } from '../../../../src/tools/engine/options.js';
import { generateOnce } from '../../../support/engine-protocol-client.js';
import { SystemUnderTest, type Worker } from '../../../support/system-processes.js';
import { waitFor } from '../../../support/wait.js';

interface Case {
  readonly label: string;
  readonly protocol: EngineProtocol;
  readonly wire: GenerateWire;
  readonly engine?: readonly string[];
  /** Besides the model, max_num_seqs, dp size and context every protocol tells. */
  readonly learned: Record<string, unknown>;
}

/** SMG's protocols tell no KV geometry; the engines' own do. */
const KV_GEOMETRY = { kv_total_blocks: 100, kv_block_size: 16, max_num_batched_tokens: 8192 };

const CASES: readonly Case[] = [
  { label: "SMG's vLLM", protocol: 'smg-vllm', wire: 'vllm', learned: {} },
  { label: 'vLLM legacy', protocol: 'vllm-legacy', wire: 'vllm-legacy', learned: {} },
  { label: "vLLM's own", protocol: 'vllm-native', wire: 'vllm-native', learned: { ...KV_GEOMETRY, data_parallel_start_rank: 0 } },
  { label: "SGLang's own, cumulative output_ids", protocol: 'sglang-native', wire: 'sglang-native', learned: { ...KV_GEOMETRY, incremental_output: false } },
  {
    label: "SGLang's own, incremental output_ids",
    protocol: 'sglang-native',
    wire: 'sglang-native',
    engine: ['--sglang-output', 'incremental'],
    learned: { ...KV_GEOMETRY, incremental_output: true },
  },
];

interface LoadBody {
  engine: { protocol: string; learned: Record<string, unknown> };
  ranks: { dp_rank: number; engine_request_limit: number | null; max_num_batched_tokens: number | null; active_decode_blocks: number; model: string | null }[];
}

async function engineGenerated(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('vllm:generation_tokens_total'))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe.each(CASES)('$label: --protocol $protocol behind --generate-wire $wire', ({ protocol, wire, engine, learned }) => {
  const sys = new SystemUnderTest();
  let worker: Worker;
  const load = async (): Promise<LoadBody> => (await (await fetch(`http://127.0.0.1:${worker.sidecar.systemPort}/load`)).json()) as LoadBody;

  beforeAll(async () => {
    worker = await sys.worker({
      engine: [
        '--protocol',
        protocol,
        '--max-num-seqs',
        '3',
        '--data-parallel-size',
        '2',
        '--num-gpu-blocks',
        '100',
        '--decode-step-ms',
        '5',
        ...(engine ?? []),
      ],
      sidecar: ['--generate-wire', wire],
      sidecarEnv: { DYN_ENGINE_REQUEST_LIMIT: 'auto', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '8' },
    });
  });
  afterAll(async () => {
    await sys.stopAll();
  });

  it('learns the capacity through the protocol, publishes it, and sets the auto limit from it', async () => {
    await waitFor(
      async () => (await load()).ranks.length === 2 && (await worker.sidecar.metric('dynamo_sidecar_engine_request_limit')) === 9,
      'two ranks and N = 9',
    );
    const body = await load();
    expect(body.engine.protocol).toBe(wire);
    expect(body.engine.learned).toEqual({ model: 'simulated-model', max_running_requests: 6, data_parallel_size: 2, max_model_len: 1600, ...learned });
    const batched = learned['max_num_batched_tokens'] ?? null;
    expect(body.ranks.map((r) => [r.dp_rank, r.engine_request_limit, r.max_num_batched_tokens, r.model])).toEqual([
      [0, 9, batched, 'simulated-model'],
      [1, 9, batched, 'simulated-model'],
    ]);
  });

  it('puts a pinned call on its rank and counts exactly the tokens the engine generated', async () => {
    const address = `127.0.0.1:${worker.sidecar.port}`;
    const long = generateOnce(protocol, address, { promptTokens: 40, maxTokens: 300, rank: 1 });
    await waitFor(async () => (await load()).ranks[1]!.active_decode_blocks > 0, 'the pinned call on rank 1');
    expect((await load()).ranks[0]!.active_decode_blocks).toBe(0);
    const short = await Promise.all(Array.from({ length: 4 }, (_, i) => generateOnce(protocol, address, { promptTokens: 20, maxTokens: 30, rank: i % 2 })));
    if (protocol === 'vllm-native') await generateOnce(protocol, address, { promptTokens: 10, maxTokens: 12, stream: false });
    expect(short.every((messages) => messages.length > 0)).toBe(true);
    await long;
    const want = 300 + 4 * 30 + (protocol === 'vllm-native' ? 12 : 0);
    expect(await engineGenerated(worker.engine.metricsUrl)).toBe(want);
    await waitFor(
      async () => (await worker.sidecar.metric('dynamo_sidecar_generate_output_tokens_total')) === want,
      `${want} output tokens counted`,
      5000,
    ).catch(async () => {
      throw new Error(`counted ${await worker.sidecar.metric('dynamo_sidecar_generate_output_tokens_total')} of ${want} output tokens`);
    });
    expect(await worker.sidecar.metric('dynamo_sidecar_generate_unparsed_messages_total')).toBe(0);
    expect(await worker.sidecar.metric('dynamo_sidecar_invalid_dp_rank_total')).toBe(0);
    await waitFor(async () => (await load()).ranks.every((r) => r.active_decode_blocks === 0), 'every call ended in the load');
  });
});
