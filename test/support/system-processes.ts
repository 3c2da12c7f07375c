/**
 * The whole system as real processes for integration tests: simulated engines
 * (`dynamo-sidecar engine`), sidecars in front of them, and frontends, each on 127.0.0.1 ports it
 * picked itself, each stopped by `stopAll()` (last started first).
 *
 *   const sys = new SystemUnderTest();
 *   const w = await sys.worker({ engine: ['--num-gpu-blocks', '64'], sidecarEnv: { DYN_ENGINE_REQUEST_LIMIT: '4' } });
 *   const f = await sys.frontend(['--worker', w.sidecar.address, '--active-decode-blocks-threshold', '0.2']);
 *   await f.post('/v1/chat/completions', {...});   await sys.stopAll();
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { SIDECAR_BIN, startSidecarProcess, type SidecarProcess } from './sidecar-process.js';

export interface EngineCli {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly address: string;
  readonly metricsUrl: string;
  readonly model: string;
  stop(): Promise<void>;
}

export interface Worker {
  readonly engine: EngineCli;
  readonly sidecar: SidecarProcess;
}

export interface FrontendProcess {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly port: number;
  readonly url: string;
  stdout(): string;
  stderr(): string;
  get(path: string): Promise<{ status: number; body: string; headers: Headers }>;
  post(path: string, body: unknown, init?: RequestInit): Promise<{ status: number; body: string; headers: Headers }>;
  /** Sum of the samples of `name` whose labels contain every given `key="value"` pair. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DYN_') && key !== 'NATS_SERVER') env[key] = value;
  return { ...env, ...extra };
}

/** Spawns the CLI and resolves with the first stdout match of `ready`, or fails with its output. */
async function spawnUntil(args: string[], env: Record<string, string>, ready: RegExp, what: string, timeoutMs = 20_000) {
  const proc = spawn(process.execPath, [SIDECAR_BIN, ...args], { env: childEnv(env) });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => (stdout += d));
  proc.stderr.on('data', (d) => (stderr += d));
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => fail(`did not start within ${timeoutMs} ms`), timeoutMs);
    const fail = (why: string): void => {
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(new Error(`${what} ${why}\nstdout: ${stdout}\nstderr: ${stderr.slice(-4000)}`));
    };
    proc.stdout.on('data', () => {
      const m = ready.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
    proc.on('exit', (code) => fail(`exited with ${code} before starting`));
  });
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> => {
    if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  return { proc, match, stop, stdout: () => stdout, stderr: () => stderr };
}

export function parseMetric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    found = true;
  }
  return found ? sum : 0;
}

export class SystemUnderTest {
  private readonly stops: (() => Promise<unknown>)[] = [];

  async engine(args: string[] = []): Promise<EngineCli> {
    const started = await spawnUntil(
      ['engine', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', ...args],
      {},
      /simulated engine ready grpc=(\S+) metrics=(\S+) model=(\S+)/,
      'simulated engine',
    );
    const engine: EngineCli = {
      proc: started.proc,
      address: started.match[1]!,
      metricsUrl: started.match[2]!,
      model: started.match[3]!,
      stop: async () => void (await started.stop('SIGKILL')),
    };
    this.stops.push(() => engine.stop());
    return engine;
  }

  /** A simulated engine and a sidecar in front of it, scraping its metrics. */
  async worker(options: { engine?: string[]; sidecar?: string[]; sidecarEnv?: Record<string, string> } = {}): Promise<Worker> {
    const engine = await this.engine(options.engine);
    const sidecar = await startSidecarProcess(
      [
        '--upstream',
        engine.address,
        '--engine-metrics-url',
        engine.metricsUrl,
        '--scrape-interval-ms',
        '50',
        '--load-heartbeat-ms',
        '200',
        ...(options.sidecar ?? []),
      ],
      options.sidecarEnv ?? {},
    );
    this.stops.push(() => sidecar.stop('SIGKILL'));
    return { engine, sidecar };
  }

  async frontend(args: string[], env: Record<string, string> = {}): Promise<FrontendProcess> {
    const started = await spawnUntil(
      ['frontend', '--http-host', '127.0.0.1', '--http-port', '0', ...args],
      env,
      /dynamo-frontend: listening on https?:\/\/127\.0\.0\.1:(\d+)/,
      'frontend',
    );
    const port = Number(started.match[1]);
    const url = `http://127.0.0.1:${port}`;
    const request = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(url + path, { ...init, signal: init.signal ?? AbortSignal.timeout(30_000) });
      return { status: res.status, body: await res.text(), headers: res.headers };
    };
    const frontend: FrontendProcess = {
      proc: started.proc,
      port,
      url,
      stdout: started.stdout,
      stderr: started.stderr,
      get: (path) => request(path),
      post: (path, body, init = {}) => request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...init }),
      metric: async (name, labels) => parseMetric((await request('/metrics')).body, name, labels),
      stop: (signal) => started.stop(signal),
    };
    this.stops.push(() => frontend.stop('SIGKILL'));
    return frontend;
  }

  async stopAll(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse()) await stop().catch(() => undefined);
  }
}

/** Sends `total` chat requests, `concurrency` at a time, and counts the HTTP statuses (bounded by the fetch timeout). */
export async function chatBurst(
  frontend: FrontendProcess,
  model: string,
  total: number,
  concurrency: number,
  body: Record<string, unknown> = {},
): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < total) {
      next++;
      const res = await frontend.post('/v1/chat/completions', {
        model,
        messages: [{ role: 'user', content: 'word '.repeat(32).trim() }],
        max_tokens: 32,
        ...body,
      });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return statuses;
}
