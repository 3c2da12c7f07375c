/** Starts the benchmark upstream (bench/upstream/server.ts) as its own pinned process. */
import { spawnProcess, type BenchProcess } from '../lib/spawn.js';
import { REPO_ROOT, TSX_NODE_ARGS, UPSTREAM_SCRIPT } from '../lib/paths.js';

export interface Upstream {
  readonly port: number;
  readonly process: BenchProcess;
  stop(): Promise<void>;
}

/** The upstream's decode tick: every 20 ms one message to every open stream (50 tokens/s each). */
export const DECODE_TICK_MS = 20;

export async function startUpstream(cpus: string | undefined): Promise<Upstream> {
  const proc = spawnProcess('bench-upstream', process.execPath, [...TSX_NODE_ARGS, UPSTREAM_SCRIPT, '0', String(DECODE_TICK_MS)], { cpus, cwd: REPO_ROOT });
  const m = await proc.waitFor(/bench-upstream: listening on (\d+)/);
  return { port: Number(m[1]), process: proc, stop: () => proc.stop() };
}
