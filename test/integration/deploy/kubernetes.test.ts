/**
 * deploy/kubernetes, built as kustomize builds it (./kustomize.ts; compared with `kubectl
 * kustomize` where a recent kubectl is on the PATH): every object checked against the Kubernetes
 * and Prometheus Operator schemas (kubernetes-models), every flag and variable of the project's
 * containers against the CLI's own --help, the promises the manifests make (only the sidecar
 * reaches the engine, hardened containers, drain timing, disruption budgets, NATS wiring,
 * scraping), and the probes and shutdown hooks against the real processes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Deployment } from 'kubernetes-models/apps/v1';
import { ConfigMap, Service, type IContainer } from 'kubernetes-models/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { PodMonitor, PrometheusRule, type IPodMonitor, type IPrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { SystemUnderTest } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';
import { cliSurface, unknownSettings, type CliSurface } from './cli-surface.js';
import { kubectlKustomize, kustomizeBuild, kustomizeVersion, normalized, type KubeObject } from './kustomize.js';

const ROOT = new URL('../../../', import.meta.url);
const KUBE = fileURLToPath(new URL('deploy/kubernetes/', ROOT));
const LAYERS = ['base', 'overlays/nats', 'overlays/nats-monitoring', 'overlays/simulated'] as const;
type Layer = (typeof LAYERS)[number];
const NATS_LAYERS: readonly Layer[] = ['overlays/nats', 'overlays/nats-monitoring', 'overlays/simulated'];
const VERSION = (JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { version: string }).version;
const IMAGE = `dynamo-sidecar:${VERSION}`;

interface Built {
  objects: KubeObject[];
  deployments: Deployment[];
  services: Service[];
  policies: NetworkPolicy[];
  budgets: PodDisruptionBudget[];
  configMaps: ConfigMap[];
  podMonitors: PodMonitor[];
  rules: PrometheusRule[];
}

interface Validating {
  validate(): void;
}

/** Each object as its kubernetes-models class (validated by the schema test). */
function typed(objects: KubeObject[]): Built & { models: [string, Validating][] } {
  const built: Built & { models: [string, Validating][] } = {
    objects,
    models: [],
    deployments: [],
    services: [],
    policies: [],
    budgets: [],
    configMaps: [],
    podMonitors: [],
    rules: [],
  };
  const add = <T extends Validating>(list: T[], model: T): T => {
    list.push(model);
    return model;
  };
  for (const o of objects) {
    const id = `${o.apiVersion} ${o.kind}/${o.metadata.name}`;
    const model: Validating = (() => {
      switch (`${o.apiVersion}/${o.kind}`) {
        case 'apps/v1/Deployment':
          return add(built.deployments, new Deployment(o));
        case 'v1/Service':
          return add(built.services, new Service(o));
        case 'networking.k8s.io/v1/NetworkPolicy':
          return add(built.policies, new NetworkPolicy(o));
        case 'policy/v1/PodDisruptionBudget':
          return add(built.budgets, new PodDisruptionBudget(o));
        case 'v1/ConfigMap':
          return add(built.configMaps, new ConfigMap(o));
        case 'monitoring.coreos.com/v1/PodMonitor':
          return add(built.podMonitors, new PodMonitor(o as unknown as IPodMonitor));
        case 'monitoring.coreos.com/v1/PrometheusRule':
          return add(built.rules, new PrometheusRule(o as unknown as IPrometheusRule));
        default:
          throw new Error(`${id}: no schema known to this test`);
      }
    })();
    built.models.push([id, model]);
  }
  return built;
}

const layers = new Map<Layer, ReturnType<typeof typed>>(LAYERS.map((layer) => [layer, typed(kustomizeBuild(join(KUBE, layer)))]));
const layer = (name: Layer) => layers.get(name)!;

function deployment(built: Built, name: string): Deployment {
  const found = built.deployments.find((d) => d.metadata?.name === name);
  if (!found) throw new Error(`no Deployment ${name}`);
  return found;
}
const podSpec = (d: Deployment) => d.spec!.template.spec!;
function container(d: Deployment, name: string): IContainer {
  const found = podSpec(d).containers.find((c) => c.name === name);
  if (!found) throw new Error(`${d.metadata?.name}: no container ${name}`);
  return found;
}
const env = (c: IContainer, name: string): string | undefined => c.env?.find((e) => e.name === name)?.value;
function requiredEnv(c: IContainer, name: string): string {
  const value = env(c, name);
  if (value === undefined) throw new Error(`container ${c.name}: no ${name}`);
  return value;
}
/** The value of `--flag value` or `--flag=value` in an argument list. */
function argValue(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) return args[i + 1];
    if (args[i]!.startsWith(`${flag}=`)) return args[i]!.slice(flag.length + 1);
  }
  return undefined;
}
const portOf = (address: string): number => Number(address.slice(address.lastIndexOf(':') + 1));
function containerPort(c: IContainer, name: string | number): number {
  if (typeof name === 'number') return name;
  const found = c.ports?.find((p) => p.name === name);
  if (!found) throw new Error(`container ${c.name}: no port ${name}`);
  return found.containerPort;
}
const podContainers = (d: Deployment): IContainer[] => [...(podSpec(d).initContainers ?? []), ...podSpec(d).containers];
const selects = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);
const podLabels = (d: Deployment) => d.spec!.template.metadata!.labels;
const preStopCommand = (c: IContainer): string[] => c.lifecycle?.preStop?.exec?.command ?? [];
/** The longest a preStop wait script waits, in seconds (`time.monotonic() + S` or `Date.now() + MS`). */
function preStopWaitBound(c: IContainer): number {
  const script = preStopCommand(c).join(' ');
  const seconds = /monotonic\(\) \+ (\d+)/.exec(script)?.[1];
  const ms = /Date\.now\(\) \+ (\d+)/.exec(script)?.[1];
  if (seconds !== undefined) return Number(seconds);
  if (ms !== undefined) return Number(ms) / 1000;
  throw new Error(`container ${c.name}: no bounded wait in its preStop hook`);
}

let surface: CliSurface;
beforeAll(async () => {
  surface = await cliSurface();
});

describe('deploy/kubernetes', () => {
  it('has the base and every overlay in this test, each building to objects of the dynamo-sidecar app', () => {
    const overlays = readdirSync(join(KUBE, 'overlays')).map((o) => `overlays/${o}`);
    expect([...overlays].sort()).toEqual(LAYERS.filter((l) => l !== 'base').sort());
    for (const name of LAYERS) {
      const { objects } = layer(name);
      expect(objects.length, name).toBeGreaterThan(0);
      const ids = objects.map((o) => `${o.kind}/${o.metadata.name}`);
      expect(new Set(ids).size, `${name}: an object twice`).toBe(ids.length);
      for (const o of objects) expect((o.metadata as { labels?: Record<string, string> }).labels?.['app.kubernetes.io/part-of'], `${name} ${o.kind}/${o.metadata.name}`).toBe('dynamo-sidecar');
    }
  });

  it('gives objects that the Kubernetes and Prometheus Operator schemas accept', () => {
    const problems: string[] = [];
    for (const name of LAYERS) {
      for (const [id, model] of layer(name).models) {
        try {
          model.validate();
        } catch (err) {
          problems.push(`${name} ${id}: ${(err as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it.skipIf((kustomizeVersion() ?? 0) < 4)('builds as kubectl kustomize does', () => {
    for (const name of LAYERS) expect(normalized(kustomizeBuild(join(KUBE, name))), name).toEqual(normalized(kubectlKustomize(join(KUBE, name))));
  });

  it('runs every container as a non-root user, read-only, without privilege escalation or capabilities, with requests and a memory limit', () => {
    for (const name of LAYERS) {
      for (const d of layer(name).deployments) {
        const where = `${name} ${d.metadata?.name}`;
        const pod = podSpec(d);
        expect(pod.securityContext?.runAsNonRoot, where).toBe(true);
        // The image's user (Dockerfile USER 1000:1000), stated so that any image runs non-root.
        expect([pod.securityContext?.runAsUser, pod.securityContext?.runAsGroup], where).toEqual([1000, 1000]);
        expect(pod.securityContext?.seccompProfile?.type, where).toBe('RuntimeDefault');
        expect(pod.automountServiceAccountToken, where).toBe(false);
        for (const c of podContainers(d)) {
          const at = `${where} ${c.name}`;
          expect(c.securityContext?.allowPrivilegeEscalation, at).toBe(false);
          expect(c.securityContext?.readOnlyRootFilesystem, at).toBe(true);
          expect(c.securityContext?.capabilities?.drop, at).toEqual(['ALL']);
          expect(c.securityContext?.capabilities?.add, at).toBeUndefined();
          expect(c.securityContext?.privileged, at).toBeUndefined();
          expect(c.resources?.requests?.['cpu'], at).toBeDefined();
          expect(c.resources?.requests?.['memory'], at).toBeDefined();
          expect(c.resources?.limits?.['memory'], at).toBeDefined();
        }
      }
    }
  });

  it("runs the project's image at the package version, through its entrypoint, with only flags and variables that its --help lists", () => {
    const problems: string[] = [];
    let checked = 0;
    for (const name of LAYERS) {
      for (const d of layer(name).deployments) {
        for (const c of podContainers(d)) {
          if (!c.image?.startsWith('dynamo-sidecar:')) continue;
          checked++;
          expect(c.image, `${name} ${c.name}`).toBe(IMAGE);
          expect(c.command, `${name} ${c.name}: the image's ENTRYPOINT runs the CLI`).toBeUndefined();
          const names = (c.env ?? []).map((e) => e.name);
          problems.push(...unknownSettings(surface, c.args ?? [], names).map((p) => `${name} ${c.name}: ${p}`));
        }
      }
    }
    expect(problems).toEqual([]);
    // The sidecar in every layer, the frontend in three, the simulated engine in one.
    expect(checked).toBe(LAYERS.length + NATS_LAYERS.length + 1);
  });

  it('lets only the sidecar reach the engine: the engine listens on loopback, the Service and the NetworkPolicy name sidecar ports only', () => {
    for (const name of LAYERS) {
      const built = layer(name);
      const worker = deployment(built, 'dynamo-worker');
      const sidecar = container(worker, 'sidecar');
      const engine = container(worker, 'engine');
      const upstream = requiredEnv(sidecar, 'DYN_SIDECAR_UPSTREAM');
      const engineArgs = engine.args ?? [];
      expect(upstream, name).toBe(`127.0.0.1:${argValue(engineArgs, '--port')}`);
      expect(argValue(engineArgs, '--host'), name).toBe('127.0.0.1');
      expect(engine.ports, `${name}: the engine declares no port`).toBeUndefined();
      const sidecarPorts = new Set([containerPort(sidecar, 'grpc'), containerPort(sidecar, 'system')]);
      expect(sidecarPorts, name).toEqual(new Set([portOf(requiredEnv(sidecar, 'DYN_SIDECAR_LISTEN')), Number(requiredEnv(sidecar, 'DYN_SYSTEM_PORT'))]));

      const services = built.services.filter((s) => selects(s.spec?.selector, podLabels(worker)));
      expect(services.map((s) => s.metadata?.name), name).toEqual(['dynamo-worker']);
      expect(services[0]!.spec!.ports!.map((p) => containerPort(sidecar, p.targetPort ?? p.port)), name).toEqual([containerPort(sidecar, 'grpc')]);

      const policies = built.policies.filter((p) => selects(p.spec?.podSelector?.matchLabels, podLabels(worker)));
      expect(policies.length, name).toBe(1);
      const policy = policies[0]!.spec!;
      expect(policy.policyTypes, name).toContain('Ingress');
      const allowed = new Set<number>();
      for (const rule of policy.ingress ?? []) {
        expect(rule.ports?.length, `${name}: an ingress rule open to every port`).toBeGreaterThan(0);
        for (const port of rule.ports ?? []) allowed.add(containerPort(sidecar, port.port!));
      }
      expect(allowed, name).toEqual(sidecarPorts);
      expect(allowed.has(portOf(upstream)), name).toBe(false);
    }
    // The simulated engine's metrics, scraped by the sidecar, stay on loopback too.
    const simulated = deployment(layer('overlays/simulated'), 'dynamo-worker');
    const metricsUrl = new URL(requiredEnv(container(simulated, 'sidecar'), 'DYN_ENGINE_METRICS_URL'));
    expect(metricsUrl.host).toBe(`127.0.0.1:${argValue(container(simulated, 'engine').args ?? [], '--metrics-port')}`);
  });

  it("opens the frontends' HTTP port only, its admin API staying on the pod's loopback", () => {
    for (const name of NATS_LAYERS) {
      const built = layer(name);
      const frontendPod = deployment(built, 'dynamo-frontend');
      const frontend = container(frontendPod, 'frontend');
      const policies = built.policies.filter((p) => selects(p.spec?.podSelector?.matchLabels, podLabels(frontendPod)));
      expect(policies.length, name).toBe(1);
      const ports = (policies[0]!.spec!.ingress ?? []).map((rule) => (rule.ports ?? []).map((p) => containerPort(frontend, p.port!)));
      expect(ports, name).toEqual([[containerPort(frontend, 'http')]]);
      expect(requiredEnv(frontend, 'DYN_FRONTEND_ADMIN_ADDRESS'), name).toMatch(/^127\.0\.0\.1:\d+$/);
    }
  });

  it('probes the sidecar on /ready and /live of its system port, and the frontend on /ready and /live of its HTTP port', () => {
    for (const name of LAYERS) {
      const built = layer(name);
      const sidecar = container(deployment(built, 'dynamo-worker'), 'sidecar');
      expect([sidecar.readinessProbe?.httpGet?.path, sidecar.readinessProbe?.httpGet?.port], name).toEqual(['/ready', 'system']);
      expect([sidecar.livenessProbe?.httpGet?.path, sidecar.livenessProbe?.httpGet?.port], name).toEqual(['/live', 'system']);
      if (!NATS_LAYERS.includes(name)) continue;
      const frontend = container(deployment(built, 'dynamo-frontend'), 'frontend');
      expect([frontend.readinessProbe?.httpGet?.path, frontend.readinessProbe?.httpGet?.port], name).toEqual(['/ready', 'http']);
      expect([frontend.livenessProbe?.httpGet?.path, frontend.livenessProbe?.httpGet?.port], name).toEqual(['/live', 'http']);
      expect(containerPort(frontend, 'http'), name).toBe(Number(requiredEnv(frontend, 'DYN_HTTP_PORT')));
      const service = built.services.find((s) => s.metadata?.name === 'dynamo-frontend')!;
      expect(service.spec!.ports!.map((p) => p.targetPort)).toEqual(['http']);
    }
  });

  it('gives each pod the termination grace its drain needs: sidecar preStop + drain grace, then the engine, which waits for the sidecar', () => {
    for (const name of LAYERS) {
      const built = layer(name);
      const worker = deployment(built, 'dynamo-worker');
      const sidecar = container(worker, 'sidecar');
      const preStop = sidecar.lifecycle?.preStop?.sleep?.seconds ?? 0;
      expect(preStop, `${name}: the endpoints need a moment to drop the pod`).toBeGreaterThan(0);
      const drainGraceS = Number(requiredEnv(sidecar, 'DYN_SIDECAR_DRAIN_GRACE_MS')) / 1000;
      const engineWait = preStopWaitBound(container(worker, 'engine'));
      // The engine waits at least as long as the sidecar may take (preStop, drain grace, 5 s to exit),
      expect(engineWait, name).toBeGreaterThanOrEqual(preStop + drainGraceS + 5);
      // and the pod's grace period leaves the engine 10 s or more to stop after that.
      expect(podSpec(worker).terminationGracePeriodSeconds, name).toBeGreaterThanOrEqual(engineWait + 10);
      if (!NATS_LAYERS.includes(name)) continue;
      const frontendPod = deployment(built, 'dynamo-frontend');
      const frontend = container(frontendPod, 'frontend');
      const frontendPreStop = frontend.lifecycle?.preStop?.sleep?.seconds ?? 0;
      expect(frontendPreStop, name).toBeGreaterThan(0);
      const shutdownS = Number(requiredEnv(frontend, 'DYN_FRONTEND_SHUTDOWN_GRACE_MS')) / 1000;
      expect(podSpec(frontendPod).terminationGracePeriodSeconds, name).toBeGreaterThanOrEqual(frontendPreStop + shutdownS + 5);
    }
  });

  it('keeps a frontend up through voluntary disruptions and lets workers go one at a time', () => {
    for (const name of LAYERS) {
      const built = layer(name);
      const worker = deployment(built, 'dynamo-worker');
      const workerBudget = built.budgets.find((b) => selects(b.spec?.selector?.matchLabels, podLabels(worker)));
      expect(workerBudget?.spec?.maxUnavailable, name).toBe(1);
      if (!NATS_LAYERS.includes(name)) continue;
      const frontend = deployment(built, 'dynamo-frontend');
      const budget = built.budgets.find((b) => selects(b.spec?.selector?.matchLabels, podLabels(frontend)));
      expect(budget?.spec?.minAvailable, name).toBe(1);
      // Fewer than the replicas, or a node drain could never evict one.
      expect(frontend.spec?.replicas, name).toBeGreaterThan(1);
    }
  });

  it('wires NATS into the sidecars and the frontends from one ConfigMap in the NATS overlays, and not in the base', () => {
    expect(env(container(deployment(layer('base'), 'dynamo-worker'), 'sidecar'), 'NATS_SERVER')).toBeUndefined();
    expect(container(deployment(layer('base'), 'dynamo-worker'), 'sidecar').env?.some((e) => e.name === 'NATS_SERVER')).toBe(false);
    for (const name of NATS_LAYERS) {
      const built = layer(name);
      const map = built.configMaps.find((m) => m.metadata?.name === 'dynamo-nats');
      expect(map?.data?.['url'], name).toMatch(/^nats:\/\//);
      for (const c of [container(deployment(built, 'dynamo-worker'), 'sidecar'), container(deployment(built, 'dynamo-frontend'), 'frontend')]) {
        const ref = c.env?.find((e) => e.name === 'NATS_SERVER')?.valueFrom?.configMapKeyRef;
        expect([ref?.name, ref?.key], `${name} ${c.name}`).toEqual(['dynamo-nats', 'url']);
      }
    }
  });

  it('scrapes the sidecars on their system port and the frontends on their HTTP port, with the rules of deploy/prometheus/alerts.yml', () => {
    const built = layer('overlays/nats-monitoring');
    const targets: [string, string, string][] = [
      ['dynamo-worker', 'sidecar', 'system'],
      ['dynamo-frontend', 'frontend', 'http'],
    ];
    for (const [name, containerName, port] of targets) {
      const d = deployment(built, name);
      const monitors = built.podMonitors.filter((m) => selects(m.spec.selector.matchLabels, podLabels(d)));
      expect(monitors.length, name).toBe(1);
      expect(monitors[0]!.spec.podMetricsEndpoints?.map((e) => [e.port, e.path]), name).toEqual([[port, '/metrics']]);
      containerPort(container(d, containerName), port);
    }
    const alerts = parse(readFileSync(new URL('deploy/prometheus/alerts.yml', ROOT), 'utf8')) as { groups: unknown };
    expect(built.rules.map((r) => r.spec.groups)).toEqual([alerts.groups]);
    // The other layers need no Prometheus Operator.
    for (const name of LAYERS.filter((l) => l !== 'overlays/nats-monitoring')) expect(layer(name).podMonitors.length + layer(name).rules.length, name).toBe(0);
  });
});

describe('deploy/kubernetes against the real processes', () => {
  const sys = new SystemUnderTest();
  const hooks: ChildProcess[] = [];
  afterAll(async () => {
    for (const hook of hooks) if (hook.exitCode === null) hook.kill('SIGKILL');
    await sys.stopAll();
  });

  it('answers the probes the manifests name, on the ports they name', async () => {
    const built = layer('overlays/nats');
    const worker = await sys.worker();
    const frontend = await sys.frontend(['--worker', worker.sidecar.address]);
    const sidecar = container(deployment(built, 'dynamo-worker'), 'sidecar');
    const frontendContainer = container(deployment(built, 'dynamo-frontend'), 'frontend');
    // Each named port, mapped to where the test's process listens.
    const listening = new Map([
      [`sidecar:${containerPort(sidecar, 'system')}`, worker.sidecar.systemPort],
      [`frontend:${containerPort(frontendContainer, 'http')}`, frontend.port],
    ]);
    for (const c of [sidecar, frontendContainer]) {
      for (const probe of [c.readinessProbe, c.livenessProbe]) {
        const port = listening.get(`${c.name}:${containerPort(c, probe!.httpGet!.port)}`);
        await waitFor(async () => {
          const res = await fetch(`http://127.0.0.1:${port}${probe!.httpGet!.path}`, { signal: AbortSignal.timeout(5000) });
          return res.status === 200;
        }, `${c.name} ${probe!.httpGet!.path} to answer 200`);
      }
    }
  });

  it("holds the engine's preStop hooks until the sidecar has exited, then lets them return", async () => {
    const worker = await sys.worker();
    const systemPort = Number(requiredEnv(container(deployment(layer('base'), 'dynamo-worker'), 'sidecar'), 'DYN_SYSTEM_PORT'));
    const engines = [container(deployment(layer('overlays/simulated'), 'dynamo-worker'), 'engine')];
    // vLLM's hook is Python: run it too where python3 is installed.
    if (spawnSync('python3', ['--version']).status === 0) engines.push(container(deployment(layer('base'), 'dynamo-worker'), 'engine'));
    const started = engines.map((engine) => {
      const [program, ...args] = preStopCommand(engine).map((part) => part.replaceAll(String(systemPort), String(worker.sidecar.systemPort)));
      const hook = spawn(program === 'node' ? process.execPath : program!, args, { stdio: 'ignore' });
      hooks.push(hook);
      const exited = new Promise<number | null>((resolve) => hook.once('exit', (code) => resolve(code)));
      return { hook, exited, name: engine.image };
    });
    // A deliberate pause: each hook polls every 0.5 s, so by now each has seen the port open and must still be waiting.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    for (const { hook, name } of started) expect(hook.exitCode, `${name}'s hook returned while the sidecar ran`).toBeNull();
    expect(await worker.sidecar.stop()).toBe(0);
    for (const { exited, name } of started) {
      const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 5000))]);
      expect(code, name).toBe(0);
    }
  });
});
