/**
 * OS-side process figures from /proc (Linux): CPU time and resident memory of a process and all
 * its descendants (nginx's worker is a child of its master).
 *
 * CPU comes from /proc/PID/task/TID/schedstat (on-CPU nanoseconds per thread) rather than
 * utime+stime of /proc/PID/stat, which are whole clock ticks (10 ms): over a 4 s window in which
 * HAProxy spends 0.2 s, a tick at each edge would be a 10% error. The scheduler updates a running
 * thread's figure at its ticks and context switches, so a reading is exact when the process is
 * idle at the edge (the benchmark puts its edges there) and at most one scheduler tick stale
 * otherwise. A thread that exits inside a window takes its time with it; the tick-based figure
 * (which keeps it) is read too, as a cross-check.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let clockTicks: number | undefined;

/** Kernel clock ticks per second (USER_HZ), usually 100: /proc/PID/stat CPU times are in these units. */
export function clkTck(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

interface StatFields {
  ppid: number;
  cpuTicks: number;
}

function readStat(pid: number): StatFields | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces; the numeric fields start after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
    return { ppid: Number(rest[1]), cpuTicks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return undefined;
  }
}

/** The pid and every live descendant, found by scanning /proc for parent links. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const stat = readStat(pid);
    if (!stat) continue;
    const list = children.get(stat.ppid);
    if (list) list.push(pid);
    else children.set(stat.ppid, [pid]);
  }
  const out: number[] = [];
  const stack = [root];
  while (stack.length && out.length < 1000) {
    const pid = stack.pop()!;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** utime + stime of the given processes (dead threads included), in seconds; whole ticks only. */
function tickSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) ticks += readStat(pid)?.cpuTicks ?? 0;
  return ticks / clkTck();
}

/** On-CPU nanoseconds of every live thread of the given processes (schedstat field 1). */
function threadNs(pids: readonly number[]): number {
  let ns = 0;
  for (const pid of pids) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // process gone
    }
    for (const tid of tids) {
      try {
        const text = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8');
        ns += Number(text.slice(0, text.indexOf(' ')));
      } catch {
        // thread gone between readdir and read
      }
    }
  }
  return ns;
}

export interface CpuReading {
  /** CLOCK_MONOTONIC ns (process.hrtime) when the reading was taken. */
  readonly atNs: bigint;
  /** Precise on-CPU ns of the tree's live threads. */
  readonly ns: number;
  /** utime+stime in seconds (tick resolution), for the cross-check. */
  readonly tickS: number;
}

/**
 * Reads the CPU time of a process tree, resolved once (the /proc scan is the slow part and must
 * not sit at a window edge). Returns a function that takes one reading.
 */
export function cpuSampler(root: number): () => CpuReading {
  const pids = processTree(root);
  return () => {
    const atNs = process.hrtime.bigint();
    return { atNs, ns: threadNs(pids), tickS: tickSeconds(pids) };
  };
}

/** CPU used between two readings: precise seconds, and the tick-based seconds for comparison. */
export function cpuBetween(a: CpuReading, b: CpuReading): { seconds: number; tickSeconds: number } {
  return { seconds: (b.ns - a.ns) / 1e9, tickSeconds: b.tickS - a.tickS };
}

/** VmRSS of the given processes, in bytes. */
export function rssBytes(pids: readonly number[]): number {
  let kb = 0;
  for (const pid of pids) {
    try {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) kb += Number(m[1]);
    } catch {
      // process gone
    }
  }
  return kb * 1024;
}
