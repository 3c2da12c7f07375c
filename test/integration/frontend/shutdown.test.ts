/**
 * Frontend shutdown, in process (engine, sidecar and frontend on 127.0.0.1 ports of their own):
 * close() waits for a request in progress up to the grace, then closes its connection, which
 * cancels the worker call, so the sidecar's slot is free and nothing hangs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../../src/config/sidecar-config.js';
import { startSimulatedEngine, type RunningEngine } from '../../../src/engine/index.js';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { startFrontend } from '../../../src/frontend/frontend.js';
import { startSidecar, type RunningSidecar } from '../../../src/sidecar.js';
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

describe('frontend shutdown', () => {
  it('gives a stream in progress the grace, then cuts it and frees the worker slot', async () => {
    const config = parseFrontendConfig({ httpHost: '127.0.0.1', httpPort: '0', workers: [`127.0.0.1:${sidecar.ingressPort}`], shutdownGraceMs: '300' }, {});
    const frontend = await startFrontend(config, { logger: recordingLogger() });
    await waitFor(() => frontend.router.ready(), 'the worker to be known');
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
