// The engine compatibility table (docs/engine-compatibility.md), cell by cell: each engine's
// recorded metrics, its GetLoads answer (written byte by byte from the upstream proto) and a
// Generate request in its layout go through the sidecar's own parsers into a LoadTracker, and what
// the load event then knows must be what the table says.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ENGINE_PATHS, type GenerateWire } from '../../../../src/protocol/engine/generate-wire.js';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import type { EngineMetricsFormat } from '../../../../src/protocol/engine/metrics-formats.js';
import { decodeGetLoads } from '../../../../src/sidecar/load/engine-get-loads.js';
import { parseEngineMetrics } from '../../../../src/sidecar/load/engine-metrics-reader.js';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { TrafficAccounting } from '../../../../src/sidecar/load/traffic-accounting.js';
import { GET_LOADS_SGLANG, GET_LOADS_VLLM, generateRequestBytes } from '../../../support/proto-bytes.js';

interface Engine {
  readonly metrics: string;
  readonly format: EngineMetricsFormat;
  /** Its GetLoads answer; undefined: the engine answers UNIMPLEMENTED (no such RPC). */
  readonly getLoads: Buffer | undefined;
  /** Its Generate method path, and the layout the sidecar is told it speaks (none: not decoded). */
  readonly generatePath: string;
  readonly wire: GenerateWire | undefined;
}

const fixture = (name: string): string => readFileSync(new URL(`../../../fixtures/engine-metrics/${name}`, import.meta.url), 'utf8');

const ENGINES: Readonly<Record<string, Engine>> = {
  'vLLM current': { metrics: 'vllm.txt', format: 'vllm', getLoads: GET_LOADS_VLLM, generatePath: ENGINE_PATHS['vllm'].generate[0]!, wire: 'vllm' },
  // GetLoads arrived in SMG's vLLM servicer (2026-06) after the layout change (2026-01).
  'vLLM legacy': { metrics: 'vllm.txt', format: 'vllm', getLoads: undefined, generatePath: ENGINE_PATHS['vllm-legacy'].generate[0]!, wire: 'vllm-legacy' },
  SGLang: { metrics: 'sglang.txt', format: 'sglang', getLoads: GET_LOADS_SGLANG, generatePath: ENGINE_PATHS['sglang'].generate[0]!, wire: 'sglang' },
  'TensorRT-LLM via Triton': {
    metrics: 'trtllm-triton.txt',
    format: 'trtllm-triton',
    getLoads: undefined,
    generatePath: '/inference.GRPCInferenceService/ModelStreamInfer',
    wire: undefined,
  },
  'trtllm-serve': { metrics: 'trtllm-serve.txt', format: 'trtllm-serve', getLoads: undefined, generatePath: '/trtllm.TrtllmService/Generate', wire: undefined },
};

const BLOCK_SIZE = 16;

/** The event's KV fields with this source, with and without --kv-total-blocks. */
function kvKnown(engine: Engine, source: string, kvTotalBlocks: number | undefined): { total: boolean; used: boolean } {
  const tracker = new LoadTracker({ workerId: 1, kvBlockSize: BLOCK_SIZE, kvTotalBlocks });
  if (source === 'scrape') tracker.applyScrape(parseEngineMetrics(fixture(engine.metrics), engine.format).ranks, false);
  else if (source === 'GetLoads' && engine.getLoads) tracker.applyScrape(decodeGetLoads(engine.getLoads, BLOCK_SIZE, kvTotalBlocks).ranks, false);
  else if (source !== 'traffic' && source !== 'GetLoads') throw new Error(`unknown source ${source}`);
  const [event] = tracker.peek();
  return { total: event!.kv_total_blocks !== null, used: event!.kv_used_blocks !== null };
}

/** Whether a Generate call of this engine shows up in active_prefill_tokens. */
function prefillKnown(engine: Engine): boolean {
  const tracker = new LoadTracker({ workerId: 1, kvBlockSize: BLOCK_SIZE });
  // A sidecar told nothing about a TensorRT-LLM engine runs with the default layout.
  const accounting = new TrafficAccounting(tracker, engine.wire ?? 'vllm');
  const tap = accounting.tap({ ':path': engine.generatePath });
  tap?.request(frameMessage(generateRequestBytes(engine.wire ?? 'vllm', 40)));
  return tracker.peek()[0]!.active_prefill_tokens === 40;
}

/** The table's rows, as written in docs/engine-compatibility.md. */
function documentedRows(): string[][] {
  const page = readFileSync(new URL('../../../../docs/engine-compatibility.md', import.meta.url), 'utf8');
  const section = page.split('# Engine compatibility')[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| engine') && !line.startsWith('|---'))
    .map((line) =>
      line
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim()),
    );
}

describe('the documented engine compatibility table', () => {
  const rows = documentedRows();

  it('has every engine with every source', () => {
    expect(rows.map(([engine, , source]) => `${engine} / ${source}`).sort()).toEqual(
      Object.keys(ENGINES)
        .flatMap((engine) => ['scrape', 'GetLoads', 'traffic'].map((source) => `${engine} / ${source}`))
        .sort(),
    );
  });

  it.each(rows)('%s (%s) with %s: kv total %s, kv used %s, prefill tokens %s', (name, wireCell, source, total, used, prefill) => {
    const engine = ENGINES[name];
    if (!engine) throw new Error(`documented row for unknown engine ${name}`);
    expect(wireCell).toBe(engine.wire ? `\`${engine.wire}\`` : 'none');
    const bare = kvKnown(engine, source, undefined);
    const withFlag = kvKnown(engine, source, 2048);
    expect(withFlag.total).toBe(true); // the flag always supplies a total
    expect({
      total: bare.total ? 'yes' : 'no',
      used: bare.used ? 'yes' : withFlag.used ? 'with `--kv-total-blocks`' : 'no',
      prefill: prefillKnown(engine) ? 'yes' : 'no',
    }).toEqual({
      total,
      used,
      prefill,
    });
  });
});
