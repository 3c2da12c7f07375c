/**
 * Child processes for the benchmark: optionally pinned with taskset (which execs the command,
 * so the pid is the real process), output drained so a chatty child never blocks on a full pipe,
 * every wait bounded in time, and stop() escalating from SIGTERM to SIGKILL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';

export interface BenchProcess {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Output so far (the last 64 KiB of each stream). */
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of re on stdout (checked as output arrives). */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Resolves with the exit code, or rejects after timeoutMs (the process is then killed). */
  exited(timeoutMs?: number): Promise<number | null>;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  /** CPU list for taskset -c, e.g. "0" or "1,2". */
  readonly cpus?: string | undefined;
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  readonly stdin?: 'pipe' | 'ignore';
}

const KEEP = 64 * 1024;
const live = new Set<BenchProcess>();

export function spawnProcess(name: string, command: string, args: readonly string[], options: SpawnOptions = {}): BenchProcess {
  const [cmd, argv] = options.cpus ? ['taskset', ['-c', options.cpus, command, ...args]] : [command, [...args]];
  const child = spawn(cmd, argv, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out = (out + d).slice(-KEEP)));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-KEEP)));
  child.on('error', () => {});
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : null))));

  const proc: BenchProcess = {
    name,
    pid: child.pid,
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor(re, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const m = re.exec(out);
          if (!m) return false;
          cleanup();
          resolve(m);
          return true;
        };
        const onData = (): void => void check();
        const timer = setTimeout(() => fail(`did not print ${re} within ${timeoutMs} ms`), timeoutMs);
        const fail = (why: string): void => {
          cleanup();
          reject(new Error(`${name}: ${why}\nstdout: ${out.slice(-2000)}\nstderr: ${err.slice(-2000)}`));
        };
        const onExit = (): void => fail(`exited (${child.exitCode ?? child.signalCode})`);
        const cleanup = (): void => {
          clearTimeout(timer);
          child.stdout!.off('data', onData);
          child.off('exit', onExit);
        };
        if (check()) return;
        child.stdout!.on('data', onData);
        child.once('exit', onExit);
      });
    },
    async exited(timeoutMs = 60_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`${name}: did not exit within ${timeoutMs} ms\nstderr: ${err.slice(-2000)}`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([exit, timeout]);
      } finally {
        clearTimeout(timer);
        live.delete(proc);
      }
    },
    async stop(signal = 'SIGTERM', graceMs = 5_000) {
      live.delete(proc);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
  live.add(proc);
  return proc;
}

/** Kills every process this module started and has not stopped yet (used on errors and exit). */
export async function stopAll(): Promise<void> {
  // SIGTERM first: a SIGKILLed nginx master would leave its worker behind.
  await Promise.all([...live].map((p) => p.stop('SIGTERM', 2000)));
}

/** Runs a command to completion, bounded in time; resolves with its output. */
export async function runToEnd(
  name: string,
  command: string,
  args: readonly string[],
  options: SpawnOptions & { timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawnProcess(name, command, args, options);
  const code = await proc.exited(options.timeoutMs ?? 60_000);
  return { code, stdout: proc.stdout(), stderr: proc.stderr() };
}

/** Polls until a TCP connect to 127.0.0.1:port succeeds (bounded). */
export async function waitForPort(port: number, timeoutMs = 10_000, owner?: BenchProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; attempt < 1000 && Date.now() < deadline; attempt++) {
    if (owner && (owner.child.exitCode !== null || owner.child.signalCode !== null)) throw new Error(`${owner.name} exited before listening on ${port}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listening on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

/** A port the OS picks (bind to 0, read it, release it) for servers that need it in a config file. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A sidecar's environment for the benchmarks: the caller's, with its gRPC and system ports picked by the OS on 127.0.0.1, and `extra` on top. */
export function localSidecarEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, DYN_SIDECAR_LISTEN: '127.0.0.1:0', DYN_SYSTEM_HOST: '127.0.0.1', DYN_SYSTEM_PORT: '0', ...extra };
}
