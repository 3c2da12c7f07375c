/**
 * A prompt too large for gRPC's message limit: the engine's server refuses the call with
 * RESOURCE_EXHAUSTED ("Received message larger than max"), the same code as a sidecar's
 * admission refusal. It is the request's fault, not the worker's load: the client gets a 4xx,
 * and the worker must not be marked overloaded (one such request would otherwise make every
 * worker refuse everyone for the overload lease). The frontend refuses such prompts itself
 * (huge-prompt-stall.test.ts); here it is told the workers take 64 MiB messages, so the engine's
 * own refusal is what the client gets, as with a misconfigured --worker-max-message-bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../../src/sidecar/config/sidecar-config.js';
import { startSimulatedEngine, type RunningEngine } from '../../../src/tools/engine/index.js';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { startFrontend, type RunningFrontend } from '../../../src/frontend/frontend.js';
import { startSidecar, type RunningSidecar } from '../../../src/sidecar/sidecar.js';
import { recordingLogger } from '../../support/recording-logger.js';
import { waitFor } from '../../support/wait.js';

let engine: RunningEngine;
let sidecar: RunningSidecar;
let frontend: RunningFrontend;

beforeAll(async () => {
  engine = await startSimulatedEngine({ decodeStepMs: 1 });
  const config = parseSidecarConfig({ listen: '127.0.0.1:0', systemHost: '127.0.0.1', systemPort: '0', engineRequestLimit: '4' }, {});
  sidecar = await startSidecar(config, { logger: recordingLogger(), upstream: { host: '127.0.0.1', port: engine.grpcPort } });
  const frontendConfig = parseFrontendConfig(
    {
      httpHost: '127.0.0.1',
      httpPort: '0',
      workers: [`127.0.0.1:${sidecar.ingressPort}`],
      overloadLeaseMs: '60000',
      maxBodyBytes: String(32 * 1024 * 1024),
      workerMaxMessageBytes: String(64 * 1024 * 1024),
    },
    {},
  );
  frontend = await startFrontend(frontendConfig, { logger: recordingLogger() });
  await waitFor(() => frontend.router.ready(), 'the worker to be known');
});
afterAll(async () => {
  await frontend?.close();
  await sidecar?.close();
  await engine?.close();
});

const complete = (prompt: string) =>
  fetch(`http://127.0.0.1:${frontend.port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: engine.options.modelName, prompt, max_tokens: 2 }),
  });

describe('a prompt larger than a gRPC message may be', () => {
  it('is a 4xx for that client, and the worker keeps serving everyone else', async () => {
    // 2.5 million ids of 2 or 3 bytes: over the engine's 4 MiB.
    const huge = 'word '.repeat(2_500_000);
    const response = await complete(huge);
    const body = (await response.json()) as { error: { message: string } };
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
    expect(body.error.message).toMatch(/too large/u);

    const next = await complete('hello there');
    expect(next.status).toBe(200);
  });
});
