/** --engine-request-limit auto: the limit from the engine's max_num_seqs, as EngineDiscovery learns it, across reconnects. */
import { join } from 'node:path';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { settingsJson } from '../../../../src/sidecar/admission/admission-control.js';
import { admissionSettingsOf, parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { autoEngineRequestLimit, followEngineCapacity } from '../../../../src/sidecar/load/engine-capacity.js';
import { parseChange } from '../../../../src/sidecar/system/admin-api.js';
import { EngineDiscovery } from '../../../../src/sidecar/load/engine-discovery.js';
import { UpstreamPool } from '../../../../src/sidecar/proxy/upstream.js';
import { startFakeEngineRpc, type RpcAnswer } from '../../../support/fake-engine-rpc.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const definition = loadSync(join(PROTO_DIR, 'vllm/vllm_engine.proto'), { keepCase: true });
const GetLoadsResponse = definition['vllm.grpc.engine.GetLoadsResponse'] as MessageTypeDefinition<Record<string, unknown>, unknown>;
const loads = (...maxRunning: number[]): Buffer =>
  GetLoadsResponse.serialize({ dp_rank_count: maxRunning.length, loads: maxRunning.map((max, rank) => ({ dp_rank: rank, max_running_requests: max })) });
const MODEL_INFO_UNIMPLEMENTED = { '/vllm.grpc.engine.VllmEngine/GetModelInfo': { status: GrpcStatus.UNIMPLEMENTED } };

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('autoEngineRequestLimit', () => {
  it.each([
    [256, 384],
    [2048, 3072],
    [5, 8],
    [1, 2],
  ])('max_running_requests %i: %i', (maxRunning, limit) => {
    expect(autoEngineRequestLimit(maxRunning)).toBe(limit);
  });

  it("stays within --engine-request-limit's range, so that GET /admission's settings are a PUT it accepts", () => {
    const limit = autoEngineRequestLimit(Number.MAX_SAFE_INTEGER);
    expect(limit).toBe(Number.MAX_SAFE_INTEGER);
    expect(autoEngineRequestLimit(2 ** 40 * 2 ** 13)).toBe(Number.MAX_SAFE_INTEGER);
    const settings = { ...admissionSettingsOf(parseSidecarConfig({ engineRequestLimit: 'auto' }, {})), engineRequestLimit: limit };
    expect(parseChange(settingsJson(settings))).toEqual({ settings });
  });
});

describe('followEngineCapacity', () => {
  async function follow(answer: (n: number) => RpcAnswer) {
    const engine = await startFakeEngineRpc('/vllm.grpc.engine.VllmEngine/GetLoads', answer, 0, MODEL_INFO_UNIMPLEMENTED);
    cleanups.push(() => engine.close());
    const pool = new UpstreamPool({ target: { host: '127.0.0.1', port: engine.port }, reconnectMinMs: 20, reconnectMaxMs: 50 }, recordingLogger());
    pool.start();
    cleanups.push(() => pool.close());
    const log = recordingLogger();
    const discovery = new EngineDiscovery({ engine: pool, wire: 'vllm', logger: recordingLogger(), timeoutMs: 2000, retryMs: 20 });
    const applied: number[] = [];
    followEngineCapacity(discovery, (limit) => applied.push(limit), log);
    cleanups.push(() => discovery.stop());
    discovery.start();
    await waitFor(() => discovery.complete, 'discovery finished');
    return { engine, applied, log };
  }

  it('applies the limit once the engine answers (summed over ranks), and logs it', async () => {
    const { applied, log } = await follow((n) => (n === 1 ? { status: GrpcStatus.UNAVAILABLE } : { body: loads(4, 4) }));
    expect(applied).toEqual([12]);
    expect(log.find('engine request limit from the engine (--engine-request-limit auto)')[0]!.fields).toMatchObject({
      engine_request_limit: 12,
      max_running_requests: 8,
      round: 1,
    });
  });

  it.each([
    ['an engine without GetLoads', { status: GrpcStatus.UNIMPLEMENTED }],
    ['an answer without max_running_requests', { body: loads(0) }],
  ] as const)('%s: applies nothing and warns once that the fallback stays', async (_what, answer) => {
    const { engine, applied, log } = await follow(() => answer);
    expect(applied).toEqual([]);
    expect(engine.calls).toBe(1);
    const warnings = log.lines.filter((line) => line.level === 'warn').map((line) => line.msg);
    expect(warnings).toEqual([expect.stringMatching(/did not tell its max_num_seqs .*the engine request limit stays at 10000/)]);
  });
});
