/** Runs one of bench/clients/*.ts as a pinned child process and returns its JSON result. */
import { clientScript, REPO_ROOT, TSX_NODE_ARGS } from './paths.js';
import { runToEnd, spawnProcess, type BenchProcess } from './spawn.js';

export async function runClient<T>(name: string, params: unknown, cpus: string | undefined, timeoutMs: number): Promise<T> {
  const { code, stdout, stderr } = await runToEnd(name, process.execPath, [...TSX_NODE_ARGS, clientScript(name), JSON.stringify(params)], {
    cpus,
    cwd: REPO_ROOT,
    timeoutMs,
  });
  const line = stdout.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`${name} exited ${code}: ${stderr.slice(-1000)}`);
  return JSON.parse(line) as T;
}

/** A client that talks in steps: JSON lines out, one stdin line in to go on. */
export function startSteppedClient(name: string, params: unknown, cpus: string | undefined): BenchProcess {
  return spawnProcess(name, process.execPath, [...TSX_NODE_ARGS, clientScript(name), JSON.stringify(params)], { cpus, cwd: REPO_ROOT, stdin: 'pipe' });
}
