/** --engine-request-limit auto: the engine's capacity from its GetLoads, and the probe that asks for it. */
import { join } from 'node:path';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { EngineCapacityProbe, engineCapacity, type EngineCapacity } from '../../../../src/sidecar/load/engine-capacity-probe.js';
import { UpstreamPool } from '../../../../src/sidecar/proxy/upstream.js';
import { startFakeEngineRpc, type RpcAnswer } from '../../../support/fake-engine-rpc.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const definition = loadSync(join(PROTO_DIR, 'vllm/vllm_engine.proto'), { keepCase: true });
const GetLoadsResponse = definition['vllm.grpc.engine.GetLoadsResponse'] as MessageTypeDefinition<Record<string, unknown>, unknown>;
const loads = (...maxRunning: number[]): Buffer =>
  GetLoadsResponse.serialize({ dp_rank_count: maxRunning.length, loads: maxRunning.map((max, rank) => ({ dp_rank: rank, max_running_requests: max })) });

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('engineCapacity', () => {
  it.each([
    { maxRunning: [256], want: { maxRunningRequests: 256, ranks: 1, limit: 384 } },
    { maxRunning: [1024, 1024], want: { maxRunningRequests: 2048, ranks: 2, limit: 3072 } },
    { maxRunning: [5], want: { maxRunningRequests: 5, ranks: 1, limit: 8 } },
    // a rank that reports none is left out, not counted as 0
    { maxRunning: [0, 7], want: { maxRunningRequests: 7, ranks: 1, limit: 11 } },
    { maxRunning: [0, 0], want: undefined },
    { maxRunning: [], want: undefined },
  ])('max_running_requests $maxRunning: $want', ({ maxRunning, want }) => {
    expect(engineCapacity(loads(...maxRunning))).toEqual(want);
  });

  it('throws on bytes that are not a GetLoadsResponse', () => {
    expect(() => engineCapacity(Buffer.from([0xff, 0xff, 0xff]))).toThrow();
  });
});

describe('EngineCapacityProbe', () => {
  async function probe(answer: (n: number) => RpcAnswer) {
    const engine = await startFakeEngineRpc('/vllm.grpc.engine.VllmEngine/GetLoads', answer);
    cleanups.push(() => engine.close());
    const pool = new UpstreamPool({ target: { host: '127.0.0.1', port: engine.port }, reconnectMinMs: 20, reconnectMaxMs: 50 }, recordingLogger());
    pool.start();
    cleanups.push(() => pool.close());
    const log = recordingLogger();
    const reported: EngineCapacity[] = [];
    const p = new EngineCapacityProbe({ engine: pool, wire: 'vllm', onCapacity: (c) => reported.push(c), logger: log, timeoutMs: 2000, retryMs: 20 });
    cleanups.push(() => p.stop());
    p.start();
    await waitFor(() => p.finished, 'the probe finished');
    return { engine, reported, log };
  }

  it('reports the capacity once the engine answers, and logs the limit it gives', async () => {
    const { reported, log } = await probe((n) => (n === 1 ? { status: GrpcStatus.UNAVAILABLE } : { body: loads(4, 4) }));
    expect(reported).toEqual([{ maxRunningRequests: 8, ranks: 2, limit: 12 }]);
    expect(log.find('engine request limit from the engine (--engine-request-limit auto)')[0]!.fields).toMatchObject({ engine_request_limit: 12, attempts: 2 });
  });

  it.each([
    ['an engine without GetLoads', { status: GrpcStatus.UNIMPLEMENTED }, /does not implement GetLoads; the engine request limit stays at 10000/],
    ['an answer without max_running_requests', { body: loads(0) }, /reports no max_running_requests; the engine request limit stays at 10000/],
  ] as const)('%s: reports nothing and warns once that the fallback stays', async (_what, answer, warning) => {
    const { engine, reported, log } = await probe(() => answer);
    expect(reported).toEqual([]);
    expect(engine.calls).toBe(1);
    const warnings = log.lines.filter((line) => line.level === 'warn').map((line) => line.msg);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(warning);
  });
});
