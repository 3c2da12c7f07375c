/**
 * ModelInfoProbe against an in-process HTTP/2 engine on a real socket, through a real
 * UpstreamPool: the served model comes from GetModelInfo once the engine is reachable, failures
 * are retried and logged once, UNIMPLEMENTED and an empty name end the asking, one attempt at a
 * time, and stop() cancels what is in flight.
 */
import { join } from 'node:path';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeEngineRpc, type FakeEngineRpc } from '../../../support/fake-engine-rpc.js';
import { ModelInfoProbe } from '../../../../src/sidecar/load/model-info-probe.js';

const GET_MODEL_INFO_PATH = '/vllm.grpc.engine.VllmEngine/GetModelInfo';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { UpstreamPool } from '../../../../src/sidecar/proxy/upstream.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const definition = loadSync(join(PROTO_DIR, 'vllm/vllm_engine.proto'), { keepCase: true });
const ModelInfoResponse = definition['vllm.grpc.engine.GetModelInfoResponse'] as MessageTypeDefinition<Record<string, unknown>, unknown>;

/** What the engine does with the n-th GetModelInfo call (1-based). */
type Answer = { model: string; served?: string } | { status: number; message?: string } | 'hang';

/** The engine answers GetModelInfo with `answer(n)` for the n-th call (1-based); stopped after each test. */
async function startEngine(answer: (n: number) => Answer, port = 0): Promise<FakeEngineRpc> {
  const engine = await startFakeEngineRpc(
    GET_MODEL_INFO_PATH,
    (n) => {
      const a = answer(n);
      if (a === 'hang' || 'status' in a) return a;
      return { body: ModelInfoResponse.serialize({ model_path: a.model, served_model_name: a.served ?? '', is_generation: true, num_gpu_blocks: 2048 }) };
    },
    port,
  );
  cleanups.push(() => engine.close());
  return engine;
}

function probeFor(port: number, options: { timeoutMs?: number; retryMs?: number } = {}): { probe: ModelInfoProbe; models: string[]; log: RecordingLogger } {
  const log = recordingLogger();
  const pool = new UpstreamPool({ target: { host: '127.0.0.1', port }, reconnectMinMs: 20, reconnectMaxMs: 50 }, recordingLogger());
  pool.start();
  cleanups.push(() => pool.close());
  const models: string[] = [];
  const probe = new ModelInfoProbe({
    engine: pool,
    onModel: (name) => models.push(name),
    logger: log,
    timeoutMs: options.timeoutMs ?? 2000,
    retryMs: options.retryMs ?? 20,
  });
  cleanups.push(() => probe.stop());
  probe.start();
  return { probe, models, log };
}

const warnings = (log: RecordingLogger): string[] => log.lines.filter((line) => line.level === 'warn').map((line) => line.msg);

describe('ModelInfoProbe', () => {
  it('prefers served_model_name (the name clients use) over model_path', async () => {
    const engine = await startEngine(() => ({ model: '/models/llama-3.1-8b', served: 'llama-3.1-8b' }));
    const { models } = probeFor(engine.port);
    await waitFor(() => models.length > 0, 'the model from GetModelInfo');
    expect(models).toEqual(['llama-3.1-8b']);
  });

  it('takes the model from GetModelInfo once the engine is reachable, asks once and logs it once', async () => {
    const engine = await startEngine(() => ({ model: 'meta-llama/Llama-3.1-8B' }));
    const { probe, models, log } = probeFor(engine.port);
    await waitFor(() => models.length > 0, 'the model');
    expect(models).toEqual(['meta-llama/Llama-3.1-8B']);
    expect(probe.finished).toBe(true);
    expect(probe.attemptCount).toBe(1);
    expect(engine.paths).toEqual([GET_MODEL_INFO_PATH]);
    expect(log.find('served model from the engine', 'info')).toHaveLength(1);
    expect(warnings(log)).toEqual([]);
  });

  it('retries until the engine answers, one attempt at a time, logging the failure once', async () => {
    const engine = await startEngine((n) => (n <= 4 ? { status: 14, message: 'loading the model' } : { model: 'qwen' }));
    const { probe, models, log } = probeFor(engine.port, { retryMs: 20 });
    await waitFor(() => models.length > 0, 'the model after the engine stopped refusing');
    expect(models).toEqual(['qwen']);
    expect(probe.attemptCount).toBe(5);
    expect(engine.maxOpen).toBe(1);
    const failures = log.lines.filter((line) => line.level === 'warn');
    expect(failures, 'one warning for four failed attempts').toHaveLength(1);
    expect(failures[0]!.msg).toMatch(/retrying every 20 ms/);
    expect(failures[0]!.fields).toMatchObject({ status: 'UNAVAILABLE', reason: 'loading the model' });
    expect(log.find('served model from the engine', 'info')[0]!.fields).toMatchObject({ model: 'qwen', attempts: 5 });
  });

  it('gives an engine that does not answer in time up and asks again, cancelling the stale attempt', async () => {
    const engine = await startEngine((n) => (n <= 2 ? 'hang' : { model: 'slow-to-start' }));
    const { models } = probeFor(engine.port, { timeoutMs: 100, retryMs: 20 });
    await waitFor(() => models.length > 0, 'the model after two attempts timed out');
    expect(models).toEqual(['slow-to-start']);
    expect(engine.calls).toBe(3);
    expect(engine.maxOpen, 'never two attempts at the engine at once').toBe(1);
    await waitFor(() => engine.cancelled === 2 && engine.open === 0, 'the timed-out attempts cancelled at the engine');
  });

  it.each([
    ['UNIMPLEMENTED (an engine without VllmEngine)', { status: 12, message: 'unknown service' }, /does not implement GetModelInfo.*--served-model-name/],
    ['an empty model_path', { model: '' }, /without served_model_name or model_path.*--served-model-name/],
  ] as const)('stops asking after %s, leaves the model unknown and says to pass --served-model-name', async (_what, answer, warning) => {
    const engine = await startEngine(() => answer);
    const { probe, models, log } = probeFor(engine.port);
    await waitFor(() => probe.finished, 'the probe to give up');
    expect(models).toEqual([]);
    expect(engine.calls).toBe(1);
    expect(warnings(log)).toHaveLength(1);
    expect(warnings(log)[0]).toMatch(warning);
    expect((probe as unknown as { retryTimer: unknown }).retryTimer, 'no retry left armed').toBeUndefined();
  });

  it('waits for an engine that is not there yet and asks once it is reachable', async () => {
    const placeholder = await startEngine(() => 'hang');
    const port = placeholder.port;
    await cleanups.pop()!(); // free the port: nothing listens there now
    const { probe, models } = probeFor(port);
    expect(probe.attemptCount).toBe(0);
    await startEngine(() => ({ model: 'late-engine' }), port);
    await waitFor(() => models.length > 0, 'the model from the engine that came up later');
    expect(models).toEqual(['late-engine']);
    expect(probe.attemptCount).toBe(1);
  });

  it('stop() cancels the attempt in flight at the engine and arms nothing more', async () => {
    const engine = await startEngine(() => 'hang');
    const { probe, models } = probeFor(engine.port, { timeoutMs: 60_000 });
    await waitFor(() => engine.open === 1, 'the attempt at the engine');
    probe.stop();
    await waitFor(() => engine.open === 0 && engine.cancelled === 1, 'the attempt cancelled at the engine');
    expect(probe.finished).toBe(true);
    expect(models).toEqual([]);
    const internals = probe as unknown as { retryTimer: unknown; unsubscribe: unknown };
    expect(internals.retryTimer).toBeUndefined();
    expect(internals.unsubscribe).toBeUndefined();
  });
});
