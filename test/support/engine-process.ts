/** Runs test/support/test-engine-main.ts as a child process that a test can kill -9 and restart. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('./test-engine-main.ts', import.meta.url));

export interface EngineProcess {
  readonly port: number;
  readonly address: string;
  readonly proc: ChildProcessWithoutNullStreams;
  kill(): Promise<void>;
  /** Releases every held call (Hold and Early). */
  release(): void;
  /** The engine's concurrency counters, asked over stdin (bounded). */
  stats(timeoutMs?: number): Promise<EngineStats>;
}

export interface EngineStats {
  active: number;
  maxActive: number;
  held: number;
  early: number;
}

export async function startEngineProcess(port = 0, timeoutMs = 15_000): Promise<EngineProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', MAIN, String(port)]);
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  const bound = await listeningPort(proc, 'test engine', timeoutMs);
  return {
    release: () => void proc.stdin.write('release\n'),
    stats: (statsTimeoutMs = 5000) =>
      new Promise<EngineStats>((resolve, reject) => {
        const seen = out.length;
        const timer = setTimeout(() => {
          proc.stdout.off('data', onData);
          reject(new Error(`test engine did not report stats within ${statsTimeoutMs} ms`));
        }, statsTimeoutMs);
        const onData = (): void => {
          const m = /stats (\{[^\n]*\})\n/.exec(out.slice(seen));
          if (!m) return;
          clearTimeout(timer);
          proc.stdout.off('data', onData);
          resolve(JSON.parse(m[1]!) as EngineStats);
        };
        proc.stdout.on('data', onData);
        proc.stdin.write('stats\n');
      }),
    port: bound,
    address: `127.0.0.1:${bound}`,
    proc,
    kill: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGKILL');
      }),
  };
}

/**
 * The port a child process prints as "listening on PORT". Rejects, with what it wrote on stderr,
 * if it exits first or takes longer than timeoutMs (then it is killed).
 */
export function listeningPort(proc: ChildProcessWithoutNullStreams, what: string, timeoutMs: number): Promise<number> {
  let out = '';
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  return new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${what} did not start within ${timeoutMs} ms: ${err}`));
    }, timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code}: ${err}`));
    });
  });
}
