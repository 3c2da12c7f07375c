/**
 * OS-side process figures from /proc (Linux): CPU time (utime + stime) and resident memory
 * of a process and all its descendants (nginx's worker is a child of its master).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let clockTicks: number | undefined;

/** Kernel clock ticks per second (USER_HZ), usually 100: /proc CPU times are in these units. */
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

/** utime + stime of the given processes, in seconds. */
export function cpuSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) ticks += readStat(pid)?.cpuTicks ?? 0;
  return ticks / clkTck();
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

/** Samples CPU seconds of a process tree between start() and stop(). */
export class CpuMeter {
  private pids: number[] = [];
  private startCpu = 0;

  constructor(private readonly rootPid: number | undefined) {}

  start(): void {
    if (this.rootPid === undefined) return;
    this.pids = processTree(this.rootPid);
    this.startCpu = cpuSeconds(this.pids);
  }

  /** CPU seconds used since start(); NaN when there is no process to measure (direct). */
  stop(): number {
    if (this.rootPid === undefined) return NaN;
    return cpuSeconds(this.pids) - this.startCpu;
  }
}
