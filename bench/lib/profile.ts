/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): self time per function and per area
 * (sidecar code, node:http2 internals, streams, GC, idle), so a missed goal can point at
 * measured hot spots rather than guesses. With a window, only the samples taken inside it
 * count: a profile's startTime and timeDeltas are microseconds of CLOCK_MONOTONIC on Linux
 * (V8's TimeTicks; checked against process.hrtime of another process, and again on every run
 * by bench/scenarios/profile.ts), the clock the load clients report their window edges in.
 */
import { readFileSync } from 'node:fs';
import { REPO_ROOT } from './paths.js';

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

export interface CpuProfile {
  nodes: CpuProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface HotFunction {
  readonly name: string;
  readonly where: string;
  readonly selfMs: number;
  /** Share of busy (non-idle) time. */
  readonly selfPct: number;
  /** The caller contributing most of this function's self time. */
  readonly topCaller: string;
}

/** CLOCK_MONOTONIC microseconds, inclusive start, exclusive end. */
export interface ProfileWindow {
  readonly fromUs: number;
  readonly toUs: number;
}

export interface ProfileDigest {
  /** The profile's own span (CLOCK_MONOTONIC us). */
  readonly profileStartUs: number;
  readonly profileEndUs: number;
  /** Length of the window digested (the whole profile without one), ms. */
  readonly windowMs: number;
  readonly samples: number;
  readonly totalMs: number;
  readonly busyMs: number;
  readonly top: HotFunction[];
  readonly areas: { area: string; selfMs: number; selfPct: number }[];
}

function shortUrl(url: string): string {
  const root = `file://${REPO_ROOT}`;
  if (url.startsWith(root)) return url.slice(root.length);
  return url.replace(/^file:\/\/.*\/node_modules\//, 'node_modules/');
}

function areaOf(name: string, url: string): string {
  if (name === '(idle)') return 'idle';
  if (name === '(garbage collector)') return 'GC';
  if (name === '(program)') return 'V8/native (program)';
  if (url.includes('/dist/') || url.includes('/src/')) return 'sidecar code (dist/)';
  if (url.includes('node_modules/prom-client')) return 'prom-client';
  if (url.startsWith('node:internal/http2')) return 'node:http2 internals';
  if (url.startsWith('node:internal/streams') || url === 'node:stream') return 'node streams';
  if (url.startsWith('node:internal/stream_base') || url.startsWith('node:net')) return 'net / stream_base';
  if (url.startsWith('node:internal/timers') || url.startsWith('node:internal/process/task_queues')) return 'timers / microtasks';
  if (url.startsWith('node:events') || url.startsWith('node:internal/events')) return 'EventEmitter';
  if (url === '') return 'native (no url)';
  return 'other node internals';
}

export function readProfile(file: string): CpuProfile {
  return JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
}

export function digestProfile(profile: CpuProfile, window?: ProfileWindow, top = 15): ProfileDigest {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const from = window?.fromUs ?? -Infinity;
  const to = window?.toUs ?? Infinity;
  let at = profile.startTime;
  let samples = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    // timeDeltas[i] is the time from the previous sample to sample i; sample i is taken at `at`
    // and stands for the interval up to the next sample.
    at += profile.timeDeltas[i] ?? 0;
    if (at < from || at >= to) continue;
    samples++;
    const dt = profile.timeDeltas[i + 1] ?? 0;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, dt));
  }
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (n: CpuProfileNode | undefined): string =>
    n ? `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url ? `${shortUrl(n.callFrame.url)}:${n.callFrame.lineNumber + 1}` : ''}`.trim() : '-';
  const fn = new Map<string, { name: string; where: string; us: number; callers: Map<string, number> }>();
  const areas = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const name = functionName || '(anonymous)';
    total += us;
    if (name === '(idle)') idle += us;
    const where = url ? `${shortUrl(url)}:${lineNumber + 1}` : '';
    const key = `${name}@${where}`;
    const entry = fn.get(key) ?? { name, where, us: 0, callers: new Map<string, number>() };
    entry.us += us;
    const caller = label(byId.get(parent.get(id) ?? -1));
    entry.callers.set(caller, (entry.callers.get(caller) ?? 0) + us);
    fn.set(key, entry);
    const area = areaOf(name, url);
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number): number => (busy > 0 ? (100 * us) / busy : NaN);
  return {
    profileStartUs: profile.startTime,
    profileEndUs: profile.endTime,
    windowMs: window ? (window.toUs - window.fromUs) / 1000 : (profile.endTime - profile.startTime) / 1000,
    samples,
    totalMs: total / 1000,
    busyMs: busy / 1000,
    top: [...fn.values()]
      .filter((f) => f.name !== '(idle)')
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({
        name: f.name,
        where: f.where,
        selfMs: f.us / 1000,
        selfPct: pct(f.us),
        topCaller: [...f.callers.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? '-',
      })),
    areas: [...areas.entries()]
      .filter(([a]) => a !== 'idle')
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, selfMs: us / 1000, selfPct: pct(us) })),
  };
}
