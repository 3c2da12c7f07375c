/**
 * docker-compose.yml and the Dockerfile cannot be run here (no Docker engine), so they are
 * checked as configuration, and every service is run as the plain process it describes, wired
 * the same way on loopback: NATS, the simulated engine, and the sidecar scraping the engine and
 * publishing to NATS.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { startNatsServer } from '../../support/nats-server.js';
import { startSidecarProcess, SIDECAR_BIN } from '../../support/sidecar-process.js';
import { waitFor } from '../../support/wait.js';

const ROOT = new URL('../../../', import.meta.url);
interface Service {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
}
const compose = parse(readFileSync(new URL('docker-compose.yml', ROOT), 'utf8')) as { services: Record<string, Service> };
const dockerfile = readFileSync(new URL('Dockerfile', ROOT), 'utf8');
const hasPromtool = spawnSync('promtool', ['--version']).status === 0;

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('docker-compose.yml', () => {
  it('has nats, the simulated engine, the sidecar and Prometheus; ours run the image entrypoint `node bin/dynamo-sidecar`', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['engine', 'nats', 'prometheus', 'sidecar']);
    expect(compose.services.engine!.build).toBe('.');
    expect(compose.services.sidecar!.build).toBe('.');
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "bin\/dynamo-sidecar"\]$/m);
    expect(dockerfile).toMatch(/^RUN npm ci /m);
  });

  it.skipIf(!hasPromtool)('ships a Prometheus config that promtool accepts, scraping the sidecar and the engine', () => {
    const config = fileURLToPath(new URL('deploy/prometheus.yml', ROOT));
    const result = spawnSync('promtool', ['check', 'config', config], { encoding: 'utf8' });
    expect(result.status, result.stdout + result.stderr).toBe(0);
    expect(readFileSync(config, 'utf8')).toMatch(/sidecar:9090[\s\S]*engine:9400/);
  });

  it('runs every service as a plain process, wired as in the compose file', async () => {
    const nats = await startNatsServer();
    cleanups.push(() => nats.stop());

    // The engine service, with its ports moved to free ones on loopback.
    const engineArgs = compose.services.engine!.command!.map((arg, i, all) =>
      all[i - 1] === '--host' ? '127.0.0.1' : all[i - 1] === '--port' || all[i - 1] === '--metrics-port' ? '0' : arg,
    );
    const engine = spawn(process.execPath, [SIDECAR_BIN, ...engineArgs]);
    cleanups.push(() => void engine.kill('SIGTERM'));
    let engineOut = '';
    engine.stdout.on('data', (d) => (engineOut += d));
    await waitFor(() => /grpc=\S+ metrics=\S+/.test(engineOut), 'the engine to start');
    const [, engineAddress, metricsUrl] = /grpc=(\S+) metrics=(\S+)/.exec(engineOut)!;

    // The sidecar service: same command and environment, service names replaced by loopback addresses.
    const hosts: Record<string, string> = { 'engine:50051': engineAddress!, 'http://engine:9400/metrics': metricsUrl!, 'nats://nats:4222': nats.url };
    const service = compose.services.sidecar!;
    const args = service.command!.map((arg) => hosts[arg] ?? arg);
    const env = Object.fromEntries(Object.entries(service.environment!).map(([k, v]) => [k, hosts[v] ?? v]));
    delete env.DYN_SYSTEM_PORT;
    const sidecar = await startSidecarProcess(args, env);
    cleanups.push(() => sidecar.stop());

    expect(sidecar.startupLine).toContain(`upstream ${engineAddress}, engine request limit 32 + queue 16`);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready');
    await waitFor(async () => (await sidecar.metric('dynamo_sidecar_nats_connected')) === 1, 'connected to NATS');
    await waitFor(async () => (await sidecar.metric('dynamo_component_total_blocks', 'dp_rank="0"')) === 2048, 'the engine scrape');
    const load = JSON.parse((await sidecar.get('/load')).body) as { subject: string };
    expect(load.subject).toBe('namespace.dynamo.component.backend.endpoint.generate.kv_metrics');
  });
});
