/**
 * The sidecar under test: a compiled CLI (this tree's dist/cli/main.js, or a baseline build) on
 * a chosen Node binary, on a port it picks itself.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { spawnProcess } from '../lib/spawn.js';
import type { SidecarVariant } from '../scenarios/types.js';
import type { AdmissionSettings, Target } from './target.js';

const STARTUP_RE = /listening on \S+:(\d+), upstream \S+, .+, system port (\d+)/;

export interface SidecarLaunch {
  readonly name: string;
  readonly variant: SidecarVariant;
  readonly upstreamPort: number;
  readonly admission?: AdmissionSettings | undefined;
  readonly cpus: string | undefined;
  /** When set, the sidecar runs with --cpu-prof and writes its profile here on exit. */
  readonly cpuProfileDir?: string;
  /**
   * CPUs for V8's sampling thread (v8:ProfEvntProc). Pinned to the sidecar's one core, it could
   * only take a sample when the main thread yields, so busy stretches would be undersampled (a
   * burst every 20 ms would look mostly idle); moved to another core it samples on time.
   */
  readonly profilerCpus?: string | undefined;
}

/** Environment without DYN_* / NATS settings of the caller leaking into the sidecar. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DYN_') && k !== 'NATS_SERVER') env[k] = v;
  return { ...env, ...extra };
}

/** Re-pins one thread of a process (found by its name) to other CPUs. */
function moveThread(pid: number, threadName: string, cpus: string): void {
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() !== threadName) continue;
    execFileSync('taskset', ['-p', '-c', cpus, tid], { stdio: 'ignore', timeout: 5000 });
    return;
  }
  throw new Error(`no thread named ${threadName} in process ${pid}`);
}

export interface SidecarTarget extends Target {
  /** CLOCK_MONOTONIC ns at spawn and when it printed its listening line (the profile clock check). */
  readonly spawnedNs: bigint;
  readonly listeningNs: bigint;
}

export async function startSidecar(launch: SidecarLaunch): Promise<SidecarTarget> {
  const main = launch.variant.main;
  if (!existsSync(main)) throw new Error(`${main} missing: run \`npx tsc -p tsconfig.json\` (npm run bench does it)`);
  const nodeArgs = launch.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${launch.cpuProfileDir}`] : [];
  const args = [
    ...nodeArgs,
    main,
    '--upstream',
    `127.0.0.1:${launch.upstreamPort}`,
    '--listen',
    '127.0.0.1:0',
    '--system-host',
    '127.0.0.1',
    '--system-port',
    '0',
  ];
  if (launch.variant.upstreamConnections !== undefined) args.push('--upstream-connections', String(launch.variant.upstreamConnections));
  const env: Record<string, string> = {};
  if (launch.admission?.limit !== undefined) {
    args.push('--engine-request-limit', String(launch.admission.limit));
    if (launch.admission.queue !== undefined) env['DYN_DYNAMO_REQUEST_QUEUE_LIMIT'] = String(launch.admission.queue);
  }
  const spawnedNs = process.hrtime.bigint();
  const proc = spawnProcess(launch.name, launch.variant.node, args, { cpus: launch.cpus, env: cleanEnv(env) });
  const m = await proc.waitFor(STARTUP_RE);
  const listeningNs = process.hrtime.bigint();
  if (launch.cpuProfileDir && launch.profilerCpus) moveThread(proc.pid, 'v8:ProfEvntProc', launch.profilerCpus);
  const systemPort = Number(m[2]);
  return {
    name: launch.name,
    kind: 'sidecar',
    port: Number(m[1]),
    pid: proc.pid,
    spawnedNs,
    listeningNs,
    async grpcCodes() {
      const res = await fetch(`http://127.0.0.1:${systemPort}/metrics`, { signal: AbortSignal.timeout(5000) });
      const text = await res.text();
      const codes: Record<string, number> = {};
      for (const line of text.split('\n')) {
        const hit = /^dynamo_sidecar_requests_total\{grpc_code="([^"]+)"\} (\S+)/.exec(line);
        if (hit) codes[hit[1]!] = Number(hit[2]);
      }
      return codes;
    },
    stop: () => proc.stop('SIGTERM', 8000),
  };
}
