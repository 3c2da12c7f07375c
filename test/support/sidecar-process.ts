/**
 * Starts the real CLI (bin/dynamo-sidecar, built dist/) as a child process on ports it picks
 * itself, waits for its startup line, and stops it. Every integration test uses this.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const SIDECAR_BIN = fileURLToPath(new URL('../../bin/dynamo-sidecar', import.meta.url));
const STARTUP_RE = /listening on (\S+):(\d+), upstream (\S+), (.+), system port (\d+)/;

export interface SidecarProcess {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly port: number;
  readonly address: string;
  readonly systemPort: number;
  readonly startupLine: string;
  stdout(): string;
  stderr(): string;
  /** GET on the system port. */
  get(path: string): Promise<{ status: number; body: string }>;
  metrics(): Promise<string>;
  /** Value of one unlabelled (or exactly-labelled) series in /metrics. */
  metric(name: string, labels?: string): Promise<number>;
  /** Sends `signal` (SIGTERM by default) unless it has exited already, and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Resolves with the exit code once the process has exited by itself. */
  exited(): Promise<number | null>;
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI to completion (for startup errors and --help), bounded in time. */
export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 15_000): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [SIDECAR_BIN, ...args], { env: cleanEnv(env) });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`dynamo-sidecar ${args.join(' ')} did not exit within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The test's environment without DYN_* settings that would leak into the child. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DYN_') && key !== 'NATS_SERVER') env[key] = value;
  return { ...env, ...extra };
}

/**
 * Ports for a test: any free one, on loopback; and /metrics rendered on every scrape, since tests
 * read it right after acting. Passed as env so the command line stays the caller's own.
 */
export const TEST_PORTS_ENV = { DYN_SIDECAR_LISTEN: '127.0.0.1:0', DYN_SYSTEM_HOST: '127.0.0.1', DYN_SYSTEM_PORT: '0', DYN_SIDECAR_METRICS_CACHE_MS: '0' };

export async function startSidecarProcess(args: string[], env: Record<string, string> = {}, timeoutMs = 15_000): Promise<SidecarProcess> {
  const proc = spawn(process.execPath, [SIDECAR_BIN, ...args], { env: cleanEnv({ ...TEST_PORTS_ENV, ...env }) });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => (stdout += d));
  proc.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));

  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`sidecar did not start within ${timeoutMs} ms`)), timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(new Error(`${err.message}\nstdout: ${stdout}\nstderr: ${stderr}`));
    };
    const onData = (): void => {
      const m = STARTUP_RE.exec(stdout);
      if (m) {
        clearTimeout(timer);
        proc.stdout.off('data', onData);
        resolve(m);
      }
    };
    proc.stdout.on('data', onData);
    void exited.then((code) => fail(new Error(`sidecar exited with ${code} before starting`)));
  });

  const port = Number(match[2]);
  const systemPort = Number(match[5]);
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const res = await fetch(`http://127.0.0.1:${systemPort}${path}`, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, body: await res.text() };
  };
  const metrics = async (): Promise<string> => (await get('/metrics')).body;
  return {
    proc,
    port,
    address: `127.0.0.1:${port}`,
    systemPort,
    startupLine: match[0],
    stdout: () => stdout,
    stderr: () => stderr,
    get,
    metrics,
    async metric(name, labels = '') {
      const text = await metrics();
      const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
      return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
    },
    exited: () => exited,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
