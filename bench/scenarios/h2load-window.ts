/**
 * An h2load run with the proxy's CPU read at its edges: right before h2load starts and 50 ms
 * after it exits (connection set-up and teardown included). The proxy is idle outside the run,
 * so the edges are exact up to its idle CPU, measured over the 200 ms just before and reported.
 * Used by the unary and overload scenarios (and their warm-ups).
 */
import { h2load, type H2loadResult, type H2loadRun } from '../lib/h2load.js';
import { cpuBetween, cpuSampler } from '../lib/proc.js';
import { sleep } from '../lib/spawn.js';
import type { Target } from '../targets/index.js';

export interface H2loadWindow {
  readonly r: H2loadResult;
  /** Proxy CPU over the run (s), precise and tick-based; NaN for direct. */
  readonly cpuS: number;
  readonly cpuTickS: number;
  /** Proxy CPU per second while idle just before the run: what the edges may add. */
  readonly idleCpuUsPerS: number;
}

export async function h2loadWindow(target: Target, run: Omit<H2loadRun, 'port'>): Promise<H2loadWindow> {
  const sample = target.pid === undefined ? undefined : cpuSampler(target.pid);
  const idle0 = sample?.();
  await sleep(200);
  const c0 = sample?.();
  const r = await h2load({ ...run, port: target.port });
  await sleep(50);
  const c1 = sample?.();
  if (!(r.done > 0)) throw new Error(`h2load completed no request (${r.failed} failed, ${r.errored} errored)`);
  const cpu = c0 && c1 ? cpuBetween(c0, c1) : undefined;
  const idle = idle0 && c0 ? cpuBetween(idle0, c0).seconds / (Number(c0.atNs - idle0.atNs) / 1e9) : NaN;
  return { r, cpuS: cpu?.seconds ?? NaN, cpuTickS: cpu?.tickSeconds ?? NaN, idleCpuUsPerS: idle * 1e6 };
}
