/**
 * The frontend in process over a real sidecar and simulated engine (127.0.0.1, ports of their
 * own): where the admin API is served, and shutdown (close() waits for a request in progress up
 * to the grace, then closes its connection, which cancels the worker call and frees the slot).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../../src/sidecar/config/sidecar-config.js';
import { startSimulatedEngine, type RunningEngine } from '../../../src/tools/engine/index.js';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { startFrontend } from '../../../src/frontend/frontend.js';
import { startSidecar, type RunningSidecar } from '../../../src/sidecar/sidecar.js';
import { recordingLogger } from '../../support/recording-logger.js';
import { waitFor } from '../../support/wait.js';

let engine: RunningEngine;
let sidecar: RunningSidecar;

beforeAll(async () => {
  engine = await startSimulatedEngine({ decodeStepMs: 20 });
  const config = parseSidecarConfig({ listen: '127.0.0.1:0', systemHost: '127.0.0.1', systemPort: '0', engineRequestLimit: '4' }, {});
  sidecar = await startSidecar(config, { logger: recordingLogger(), upstream: { host: '127.0.0.1', port: engine.grpcPort } });
});
afterAll(async () => {
  await sidecar?.close();
  await engine?.close();
});

async function frontendWith(flags: Record<string, string>, env: Record<string, string> = {}) {
  const config = parseFrontendConfig({ httpHost: '127.0.0.1', httpPort: '0', workers: [`127.0.0.1:${sidecar.ingressPort}`], ...flags }, env);
  const frontend = await startFrontend(config, { logger: recordingLogger() });
  await waitFor(() => frontend.router.ready(), 'the worker to be known');
  return frontend;
}

const status = async (port: number, path: string): Promise<number> => (await fetch(`http://127.0.0.1:${port}${path}`)).status;

describe('the admin API', () => {
  it('is on the HTTP port by default, only on --admin-address when given, and nowhere when disabled', async () => {
    const shared = await frontendWith({});
    expect(await status(shared.port, '/busy_threshold')).toBe(200);
    await shared.close();

    const separate = await frontendWith({ adminAddress: '127.0.0.1:0' });
    expect(separate.adminPort).toBeGreaterThan(0);
    expect(await status(separate.adminPort!, '/busy_threshold')).toBe(200);
    expect(await status(separate.port, '/busy_threshold')).toBe(404);
    expect(await status(separate.port, '/v1/models')).toBe(200);
    await separate.close();

    const off = await frontendWith({ adminAddress: '127.0.0.1:0' }, { DYN_DISABLE_FRONTEND_ADMIN_API: 'true' });
    expect(off.adminPort).toBeUndefined();
    expect(await status(off.port, '/busy_threshold')).toBe(404);
    await off.close();
  });
});

describe('finished worker calls', () => {
  it("end with the worker's own OK, never a reset from the frontend (which the sidecar would count as an early reset)", async () => {
    const frontend = await frontendWith({});
    const codes = async (): Promise<Record<string, number>> => {
      const metric = await sidecar.registry.getSingleMetric('dynamo_sidecar_requests_total')!.get();
      return Object.fromEntries(metric.values.map((v) => [String(v.labels['grpc_code']), v.value]));
    };
    const before = await codes();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`http://127.0.0.1:${frontend.port}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: engine.options.modelName, prompt: 'hello there', max_tokens: 2, stream: i % 2 === 0 }),
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    await waitFor(async () => ((await codes())['OK'] ?? 0) - (before['OK'] ?? 0) === 20, 'the sidecar to count 20 OK calls');
    expect((await codes())['CANCELLED'] ?? 0).toBe(before['CANCELLED'] ?? 0);
    await frontend.close();
  });
});

describe('--request-timeout-ms', () => {
  it('answers 504 when a worker call outlives it, and frees the worker slot', async () => {
    const frontend = await frontendWith({ requestTimeoutMs: '300' });
    // 400 prompt words at the engine's 50,000 tokens/s prefill are fast; 4000 output tokens at 20 ms are not.
    const started = performance.now();
    const res = await fetch(`http://127.0.0.1:${frontend.port}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: engine.options.modelName, prompt: 'word '.repeat(400), max_tokens: 4000 }),
    });
    expect(res.status).toBe(504);
    expect(performance.now() - started).toBeLessThan(5000);
    await waitFor(() => sidecar.gate.inEngine === 0, 'the worker slot to be freed');
    await frontend.close();
  });
});

describe('frontend shutdown', () => {
  it('gives a stream in progress the grace, then cuts it and frees the worker slot', async () => {
    const frontend = await frontendWith({ shutdownGraceMs: '300' });
    const response = await fetch(`http://127.0.0.1:${frontend.port}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: engine.options.modelName, prompt: 'a long story', max_tokens: 4000, stream: true }),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    await reader.read();
    expect(sidecar.gate.inEngine).toBe(1);

    const started = performance.now();
    await frontend.close();
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(5000);
    await waitFor(() => sidecar.gate.inEngine === 0, 'the worker slot to be freed');
    await reader.cancel().catch(() => undefined);
  });
});
