/**
 * docker-compose.yml and the Dockerfile cannot be run here (no Docker engine), so they are
 * checked as configuration, and every service is run as the plain process it describes, wired
 * the same way on loopback: NATS, the simulated engine, the sidecar scraping the engine and
 * publishing to NATS, and the frontend routing on those events. Each service's health check, and
 * the image's own HEALTHCHECK, runs against its process.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCleanups } from '../../support/cleanups.js';
import { natsServerBinary } from '../../support/nats-server.js';
import { startSidecarProcess, SIDECAR_BIN } from '../../support/sidecar-process.js';
import { SystemUnderTest } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';
import { cliSurface, unknownSettings, type CliSurface } from './cli-surface.js';

const ROOT = new URL('../../../', import.meta.url);
const VERSION = (JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { version: string }).version;
interface Service {
  image?: string;
  build?: string;
  pull_policy?: string;
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
}
const compose = parse(readFileSync(new URL('docker-compose.yml', ROOT), 'utf8')) as { services: Record<string, Service> };
const services = compose.services;
const service = (name: string): Service => {
  const found = services[name];
  if (!found) throw new Error(`no service ${name}`);
  return found;
};
const dockerfile = readFileSync(new URL('Dockerfile', ROOT), 'utf8');
const hasPromtool = spawnSync('promtool', ['--version']).status === 0;
const hasWget = spawnSync('wget', ['--version']).status === 0;

/** The Dockerfile's HEALTHCHECK command (exec form). */
function imageHealthcheck(): string[] {
  const match = /^HEALTHCHECK[^\n]*(?:\\\n[^\n]*)*?CMD (\[.*\])$/m.exec(dockerfile);
  if (!match) throw new Error('no HEALTHCHECK CMD [...] in the Dockerfile');
  return JSON.parse(match[1]!) as string[];
}

/** Runs a health check's command here (`node` is this Node), with addresses replaced; its exit code. */
function runCheck(command: readonly string[], replace: Record<string, string>, env: Record<string, string> = {}): number | null {
  const [program, ...args] = command.map((part) => Object.entries(replace).reduce((text, [from, to]) => text.replaceAll(from, to), part));
  const result = spawnSync(program === 'node' ? process.execPath : program!, args, { env: { ...process.env, ...env }, timeout: 10_000, stdio: 'ignore' });
  return result.status;
}
const healthcheckCommand = (name: string): string[] => {
  const test = service(name).healthcheck?.test ?? [];
  expect(test[0], `${name}: exec form`).toBe('CMD');
  return test.slice(1);
};

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let surface: CliSurface;
beforeAll(async () => {
  surface = await cliSurface();
});

const cleanups: (() => unknown)[] = [];
afterAll(() => runCleanups(cleanups));

describe('docker-compose.yml', () => {
  it('has NATS, the simulated engine, the sidecar, the frontend and Prometheus; the project image is built once and reused', () => {
    expect(Object.keys(services).sort()).toEqual(['engine', 'frontend', 'nats', 'prometheus', 'sidecar']);
    const built = Object.entries(services).filter(([, s]) => s.build !== undefined);
    expect(built.map(([name, s]) => [name, s.build])).toEqual([['engine', '.']]);
    for (const name of ['engine', 'sidecar', 'frontend']) expect(service(name).image, name).toBe(`dynamo-sidecar:${VERSION}`);
    // Those that reuse the image must not look for it in a registry before `engine` has built it.
    for (const name of ['sidecar', 'frontend']) expect(service(name).pull_policy, name).toBe('never');
  });

  it('pins NATS and Prometheus to exact release tags', () => {
    expect(service('nats').image).toMatch(/^nats:2\.\d+\.\d+-alpine$/);
    expect(service('prometheus').image).toMatch(/^prom\/prometheus:v3\.\d+\.\d+$/);
  });

  it('starts a service only once what it needs is healthy, and each of those has an exec-form health check', () => {
    expect(service('sidecar').depends_on).toEqual({ engine: { condition: 'service_healthy' }, nats: { condition: 'service_healthy' } });
    expect(service('frontend').depends_on).toEqual({ nats: { condition: 'service_healthy' }, sidecar: { condition: 'service_healthy' } });
    for (const s of Object.values(services)) {
      for (const [needed, { condition }] of Object.entries(s.depends_on ?? {})) {
        expect(['service_healthy', 'service_started'], needed).toContain(condition);
        if (condition === 'service_healthy') expect(service(needed).healthcheck?.test[0], needed).toBe('CMD');
      }
    }
  });

  it("gives the project's commands only flags and variables that the CLI's --help lists", () => {
    const problems: string[] = [];
    for (const name of ['engine', 'sidecar', 'frontend']) {
      const s = service(name);
      problems.push(...unknownSettings(surface, s.command ?? [], Object.keys(s.environment ?? {})).map((p) => `${name}: ${p}`));
    }
    expect(problems).toEqual([]);
  });

  it.skipIf(!hasPromtool)('ships a Prometheus config that promtool accepts, scraping the sidecar, the frontend and the engine, with the alert rules mounted', () => {
    const config = fileURLToPath(new URL('deploy/prometheus/prometheus.yml', ROOT));
    const result = spawnSync('promtool', ['check', 'config', config], { encoding: 'utf8' });
    expect(result.status, result.stdout + result.stderr).toBe(0);
    const text = readFileSync(config, 'utf8');
    for (const target of ['sidecar:9090', 'frontend:8000', 'engine:9400']) expect(text).toContain(`"${target}"`);
    // Each file the container reads is mounted from the repository, the rules beside the config.
    const mounts = Object.fromEntries((service('prometheus').volumes ?? []).map((v) => v.split(':') as [string, string, string]).map(([from, to]) => [to, from]));
    expect(mounts['/etc/prometheus/prometheus.yml']).toBe('./deploy/prometheus/prometheus.yml');
    for (const rules of (parse(text) as { rule_files: string[] }).rule_files) {
      const source = mounts[`/etc/prometheus/${rules}`];
      expect(source, rules).toBeDefined();
      expect(existsSync(new URL(source!, ROOT)), source).toBe(true);
    }
  });
});

describe('Dockerfile', () => {
  it('builds on Node 24 in two stages and runs as a non-root user, the CLI as its entrypoint', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-[a-z]+-slim$/m);
    expect(dockerfile.match(/^FROM \$\{NODE_IMAGE\}/gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\} AS build$/m);
    expect(dockerfile).toMatch(/^COPY --from=build /m);
    expect(dockerfile).toMatch(/^RUN npm ci /m);
    // A numeric user, so that Kubernetes' runAsNonRoot can check it; not root.
    const user = /^USER (\d+)(?::(\d+))?$/m.exec(dockerfile);
    expect(user).not.toBeNull();
    expect(Number(user![1])).toBeGreaterThan(0);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "bin\/dynamo-sidecar"\]$/m);
    expect(imageHealthcheck().join(' ')).toContain('/ready');
  });
});

describe('docker-compose.yml as plain processes', () => {
  it('runs every service wired as in the compose file, each passing its health check, the frontend answering through the sidecar', async () => {
    // NATS with the compose command, on free loopback ports.
    const [natsPort, monitorPort] = [await freePort(), await freePort()];
    const natsArgs = service('nats').command!.map((arg, i, all) =>
      all[i - 1] === '-a' ? '127.0.0.1' : all[i - 1] === '-p' ? String(natsPort) : all[i - 1] === '-m' ? String(monitorPort) : arg,
    );
    const nats = spawn(natsServerBinary(), natsArgs, { stdio: 'ignore' });
    cleanups.push(() => nats.kill('SIGKILL'));
    const natsUrl = `nats://127.0.0.1:${natsPort}`;
    await waitFor(async () => (await fetch(`http://127.0.0.1:${monitorPort}/healthz`).catch(() => undefined))?.ok === true, 'NATS to be healthy');
    if (hasWget) expect(runCheck(healthcheckCommand('nats'), { '127.0.0.1:8222': `127.0.0.1:${monitorPort}` }), 'nats health check').toBe(0);

    // The engine service, with its ports moved to free ones on loopback.
    const engineArgs = service('engine').command!.map((arg, i, all) =>
      all[i - 1] === '--host' ? '127.0.0.1' : all[i - 1] === '--port' || all[i - 1] === '--metrics-port' ? '0' : arg,
    );
    const engine = spawn(process.execPath, [SIDECAR_BIN, ...engineArgs]);
    cleanups.push(() => engine.kill('SIGKILL'));
    let engineOut = '';
    engine.stdout.on('data', (d) => (engineOut += d));
    await waitFor(() => /grpc=\S+ metrics=\S+/.test(engineOut), 'the engine to start');
    const [, engineAddress, metricsUrl] = /grpc=(\S+) metrics=(\S+)/.exec(engineOut)!;
    expect(runCheck(healthcheckCommand('engine'), { '127.0.0.1:9400': new URL(metricsUrl!).host }), 'engine health check').toBe(0);

    // The sidecar service: same command and environment, service names replaced by loopback addresses.
    const hosts: Record<string, string> = { 'engine:50051': engineAddress!, 'http://engine:9400/metrics': metricsUrl!, 'nats://nats:4222': natsUrl };
    const sidecarService = service('sidecar');
    const args = sidecarService.command!.map((arg) => hosts[arg] ?? arg);
    const env = Object.fromEntries(Object.entries(sidecarService.environment!).map(([k, v]) => [k, hosts[v] ?? v]));
    delete env['DYN_SYSTEM_PORT'];
    const sidecar = await startSidecarProcess(args, env);
    cleanups.push(() => sidecar.stop());
    expect(sidecar.startupLine).toContain(`upstream ${engineAddress}, engine request limit 32 + queue 16`);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready');
    await waitFor(async () => (await sidecar.metric('dynamo_sidecar_nats_connected')) === 1, 'connected to NATS');
    await waitFor(async () => (await sidecar.metric('dynamo_component_total_blocks', 'dp_rank="0"')) === 2048, 'the engine scrape');
    const load = JSON.parse((await sidecar.get('/load')).body) as { subject: string };
    expect(load.subject).toBe('namespace.dynamo.component.backend.endpoint.generate.kv_metrics');
    const systemAddress = `127.0.0.1:${sidecar.systemPort}`;
    expect(runCheck(healthcheckCommand('sidecar'), { '127.0.0.1:9090': systemAddress }), 'sidecar health check').toBe(0);
    // The image's own HEALTHCHECK reads the port from DYN_SYSTEM_PORT: it passes on the sidecar's, fails on a closed one.
    expect(runCheck(imageHealthcheck(), {}, { DYN_SYSTEM_PORT: String(sidecar.systemPort) }), 'image HEALTHCHECK').toBe(0);
    expect(runCheck(imageHealthcheck(), {}, { DYN_SYSTEM_PORT: String(await freePort()) }), 'image HEALTHCHECK, nothing listening').toBe(1);

    // The frontend service, learning the worker from the sidecar's NATS events.
    const sys = new SystemUnderTest();
    cleanups.push(() => sys.stopAll());
    const frontendService = service('frontend');
    const frontendArgs = frontendService.command!.slice(1).map((arg, i, all) => (all[i - 1] === '--http-port' ? '0' : arg));
    expect(service('frontend').command![0]).toBe('frontend');
    const frontendEnv = Object.fromEntries(Object.entries(frontendService.environment!).map(([k, v]) => [k, hosts[v] ?? v]));
    const frontend = await sys.frontend(frontendArgs, frontendEnv);
    await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to learn the worker over NATS');
    expect(runCheck(healthcheckCommand('frontend'), { '127.0.0.1:8000': `127.0.0.1:${frontend.port}` }), 'frontend health check').toBe(0);
    const res = await frontend.post('/v1/chat/completions', { model: 'simulated-model', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 });
    expect(res.status, res.body).toBe(200);
  });
});
