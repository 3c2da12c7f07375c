/**
 * Other work on the machine: CPU used during a scenario by processes this benchmark did not
 * start (another benchmark, a build), from /proc/PID/stat of every process alive at both ends.
 * On a 2-core machine a second job running alongside moves every figure; the report names it,
 * so a skewed run is recognisable as such instead of being trusted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { clkTck, processTree } from './proc.js';

interface Snapshot {
  readonly atMs: number;
  readonly ticks: Map<number, { ticks: number; name: string }>;
}

function scan(): Snapshot {
  const ticks = new Map<number, { ticks: number; name: string }>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    try {
      const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = text.lastIndexOf(')');
      const rest = text.slice(close + 2).split(' ');
      ticks.set(pid, { ticks: Number(rest[11]) + Number(rest[12]), name: text.slice(text.indexOf('(') + 1, close) });
    } catch {
      // gone
    }
  }
  return { atMs: Date.now(), ticks };
}

export interface ForeignLoad {
  /** CPU cores' worth used by other processes over the interval (1.0 = one core busy). */
  readonly cores: number;
  /** The busiest of them, e.g. "node (pid 407) 0.37". */
  readonly top: string[];
}

export class ForeignLoadMeter {
  private start = scan();

  /** CPU of processes alive at both ends that are neither this harness nor children it spawned since. */
  stop(): ForeignLoad {
    const end = scan();
    const ours = new Set(processTree(process.pid));
    const seconds = (end.atMs - this.start.atMs) / 1000;
    const users: { pid: number; name: string; cores: number }[] = [];
    for (const [pid, a] of this.start.ticks) {
      const b = end.ticks.get(pid);
      if (!b || ours.has(pid) || b.name !== a.name) continue;
      const cores = (b.ticks - a.ticks) / clkTck() / seconds;
      if (cores > 0) users.push({ pid, name: b.name, cores });
    }
    users.sort((x, y) => y.cores - x.cores);
    return {
      cores: users.reduce((s, u) => s + u.cores, 0),
      top: users.slice(0, 3).map((u) => `${u.name} (pid ${u.pid}) ${u.cores.toFixed(2)}`),
    };
  }
}
