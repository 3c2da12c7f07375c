// startSimulatedEngine in process on 127.0.0.1 (ports the OS picks): option checks before any
// port is taken, the addresses it reports, stats summed over dp ranks, a port already taken
// (nothing left bound), and close (in-flight calls UNAVAILABLE, idempotent, both ports freed).
import type * as grpc from '@grpc/grpc-js';
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { engineClient, generate, unary } from '../../../support/vllm-client.js';

const engines: RunningEngine[] = [];
const clients: grpc.Client[] = [];
const servers: Server[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  for (const engine of engines.splice(0)) await engine.close();
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

async function start(overrides: Parameters<typeof startSimulatedEngine>[0] = {}): Promise<RunningEngine> {
  const engine = await startSimulatedEngine({ port: 0, metricsPort: 0, ...overrides });
  engines.push(engine);
  return engine;
}

function listen(port = 0): Promise<Server & { port: number }> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      servers.push(server);
      resolve(Object.assign(server, { port: (server.address() as { port: number }).port }));
    });
  });
}

/** A port free a moment ago (bound to 0, then released). */
async function freePort(): Promise<number> {
  const server = await listen();
  const { port } = server;
  servers.splice(servers.indexOf(server), 1);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function canBind(port: number): Promise<boolean> {
  try {
    await listen(port);
    return true;
  } catch {
    return false;
  }
}

describe('startSimulatedEngine', () => {
  it('refuses bad options with a ConfigError naming them, before binding anything', async () => {
    const port = await freePort();
    await expect(startSimulatedEngine({ port, numGpuBlocks: 0 })).rejects.toBeInstanceOf(ConfigError);
    await expect(startSimulatedEngine({ port, blockSize: -1 })).rejects.toThrow(/--block-size/);
    expect(await canBind(port)).toBe(true);
  });

  it('reports its ports, a grpc-js address and the metrics URL, and serves both', async () => {
    const engine = await start({ modelName: 'sim-i' });
    expect(engine.grpcPort).toBeGreaterThan(0);
    expect(engine.metricsPort).toBeGreaterThan(0);
    expect(engine.metricsPort).not.toBe(engine.grpcPort);
    expect(engine.address).toBe(`127.0.0.1:${engine.grpcPort}`);
    expect(engine.metricsUrl).toBe(`http://127.0.0.1:${engine.metricsPort}/metrics`);
    expect(engine.options).toMatchObject({ modelName: 'sim-i', host: '127.0.0.1' });
    const client = engineClient(engine.address);
    clients.push(client);
    expect(await unary(client, 'GetModelInfo')).toMatchObject({ model_path: 'sim-i' });
    const metrics = await fetch(engine.metricsUrl);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('vllm:num_requests_running{model_name="sim-i",engine="0"} 0');
  });

  it('gives stats summed over the dp ranks and per rank, with only the five public fields', async () => {
    const engine = await start({ dataParallelSize: 3, numGpuBlocks: 40 });
    expect(engine.stats()).toEqual({ running: 0, waiting: 0, usedBlocks: 0, totalBlocks: 120, generatedTokens: 0 });
    expect(engine.rankStats()).toEqual(Array.from({ length: 3 }, () => ({ running: 0, waiting: 0, usedBlocks: 0, totalBlocks: 40, generatedTokens: 0 })));
  });

  it('counts the tokens of a finished call', async () => {
    const engine = await start({ decodeStepMs: 1, prefillTokensPerS: 1_000_000 });
    const client = engineClient(engine.address);
    clients.push(client);
    const out = await generate(client, { request_id: 'a', tokenized: { input_ids: [1, 2, 3] }, sampling_params: { max_tokens: 4 }, stream: false });
    expect(out.code).toBe(0);
    expect(engine.stats()).toMatchObject({ running: 0, usedBlocks: 0, generatedTokens: 4 });
  });

  it('rejects when the metrics port is taken, leaving the gRPC port free', async () => {
    const taken = await listen();
    const grpcPort = await freePort();
    await expect(startSimulatedEngine({ port: grpcPort, metricsPort: taken.port })).rejects.toThrow(/EADDRINUSE/);
    expect(await canBind(grpcPort)).toBe(true);
  });

  it('rejects when the gRPC port is taken, leaving the metrics port free', async () => {
    const taken = await listen();
    const metricsPort = await freePort();
    await expect(startSimulatedEngine({ port: taken.port, metricsPort })).rejects.toThrow();
    expect(await canBind(metricsPort)).toBe(true);
  });
});

describe('RunningEngine.close', () => {
  it('ends in-flight calls with UNAVAILABLE and frees both ports', async () => {
    const engine = await start({ decodeStepMs: 60_000 });
    const client = engineClient(engine.address);
    clients.push(client);
    const pending = generate(client, { request_id: 'long', text: 'a b c', sampling_params: { max_tokens: 100 }, stream: true });
    // GetServerInfo is answered after the Generate call has reached the engine on the same connection.
    for (let i = 0; i < 200 && engine.stats().running + engine.stats().waiting === 0; i++) await unary(client, 'GetServerInfo');
    expect(engine.stats().running + engine.stats().waiting).toBe(1);
    await engine.close();
    expect(await pending).toMatchObject({ code: 14, details: 'simulated engine shutting down' });
    expect(engine.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
    expect(await canBind(engine.grpcPort)).toBe(true);
    expect(await canBind(engine.metricsPort)).toBe(true);
  });

  it('is idempotent: every call returns the same closing', async () => {
    const engine = await start();
    const first = engine.close();
    expect(engine.close()).toBe(first);
    await first;
    await expect(engine.close()).resolves.toBeUndefined();
  });
});
