/** Facts about the machine and tool versions, recorded with every result. */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, totalmem } from 'node:os';
import type { CpuPlan } from './affinity.js';

function tool(cmd: string, args: string[], re: RegExp): string | null {
  try {
    const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 5000 });
    return re.exec(out)?.[1] ?? out.trim().split('\n')[0] ?? null;
  } catch (err) {
    // nginx -v prints to stderr
    const stderr = (err as { stderr?: unknown }).stderr;
    return typeof stderr === 'string' ? (re.exec(stderr)?.[1] ?? null) : null;
  }
}

function nginxVersion(): string | null {
  // nginx -v prints to stderr.
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8', timeout: 5000 });
  return /nginx\/(\S+)/.exec(`${r.stdout ?? ''}${r.stderr ?? ''}`)?.[1] ?? null;
}

export function has(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  memoryBytes: number;
  kernel: string;
  node: string;
  versions: Record<string, string | null>;
  affinity: string;
  gitCommit: string | null;
  /** 1/5/15-minute load averages when the run started: other work on the machine shows here. */
  loadAverageAtStart: number[];
}

export function machineInfo(plan: CpuPlan): MachineInfo {
  let governor: string | null = null;
  try {
    governor = readFileSync('/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor', 'utf8').trim();
  } catch {
    governor = null;
  }
  return {
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryBytes: totalmem(),
    kernel: release(),
    node: process.version,
    versions: {
      haproxy: tool('haproxy', ['-v'], /HAProxy version (\S+)/),
      nginx: nginxVersion(),
      h2load: tool('h2load', ['--version'], /nghttp2\/(\S+)/),
      cpufreqGovernor: governor,
    },
    affinity: plan.description,
    gitCommit: tool('git', ['rev-parse', '--short', 'HEAD'], /^(\w+)/),
    loadAverageAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}
