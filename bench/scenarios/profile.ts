/**
 * CPU profiles of the sidecar under the loads of scenarios 1 (unary) and 2 (streaming flood):
 * the sidecar runs with `node --cpu-prof`, is stopped with SIGTERM (it exits 0, so V8 writes
 * the profile), and the profile is digested into top self-time functions and areas.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runClient } from '../lib/client.js';
import { h2load, writeBodyFile } from '../lib/h2load.js';
import { digestProfile, type ProfileDigest } from '../lib/profile.js';
import { sleep } from '../lib/spawn.js';
import { renderTable } from '../report/table.js';
import { startSidecar } from '../targets/sidecar.js';
import { startUpstream } from '../targets/upstream.js';
import { streamClientParams } from './streaming.js';
import type { BenchContext } from './types.js';

export interface ProfileSummary {
  readonly scenario: string;
  readonly load: string;
  readonly digest: ProfileDigest;
}

export async function runProfiles(ctx: BenchContext): Promise<ProfileSummary[]> {
  const out: ProfileSummary[] = [];
  const upstream = await startUpstream(ctx.plan.upstream);
  try {
    const seconds = ctx.options.quick ? 1 : 4;
    if (ctx.options.scenarios.includes('unary')) {
      const load = `h2load -D ${seconds} -c 8 -m 8, 100 B unary echo`;
      out.push({
        scenario: 'unary',
        load,
        digest: await profiled(ctx, 'unary', upstream.port, async (port) => {
          await h2load({
            port,
            path: '/bench.Bench/Unary',
            bodyFile: writeBodyFile(ctx.dir, 100),
            durationS: seconds,
            clients: 8,
            streamsPerClient: 8,
            cpus: ctx.plan.client,
            dir: ctx.dir,
          });
        }),
      });
    }
    if (ctx.options.scenarios.includes('streaming')) {
      // Paced: one message per write, the regime where the latency goal is judged.
      const load = 'stream-client paced, 256 concurrent calls, one token per stream every 20 ms';
      out.push({
        scenario: 'streaming',
        load,
        digest: await profiled(ctx, 'streaming', upstream.port, async (port) => {
          const params = streamClientParams(port, 'paced', ctx.options.quick);
          await runClient('stream-client', params, ctx.plan.client, 60_000);
        }),
      });
    }
  } finally {
    await upstream.stop();
  }
  return out;
}

async function profiled(ctx: BenchContext, name: string, upstreamPort: number, load: (port: number) => Promise<void>): Promise<ProfileDigest> {
  const dir = join(ctx.dir, `cpuprofile-${name}`);
  mkdirSync(dir, { recursive: true });
  const sidecar = await startSidecar({ name: `sidecar-profile-${name}`, upstreamPort, cpus: ctx.plan.proxy, cpuProfileDir: dir });
  try {
    await load(sidecar.port);
  } finally {
    await sidecar.stop();
  }
  for (let i = 0; i < 50; i++) {
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (file) return digestProfile(join(dir, file));
    await sleep(100);
  }
  throw new Error(`no .cpuprofile written in ${dir}`);
}

export function renderProfiles(profiles: readonly ProfileSummary[]): string {
  const parts: string[] = [];
  for (const p of profiles) {
    const d = p.digest;
    parts.push(`== sidecar CPU profile, ${p.scenario} (${p.load}): busy ${d.busyMs.toFixed(0)} ms of ${d.totalMs.toFixed(0)} ms sampled`);
    parts.push(
      renderTable(
        ['area', 'self ms', 'self % of busy'],
        d.areas.map((a) => [a.area, a.selfMs.toFixed(0), a.selfPct.toFixed(1)]),
      ),
    );
    parts.push('');
    parts.push(
      renderTable(
        ['top self-time function', 'where', 'self ms', '%', 'main caller'],
        d.top.map((f) => [f.name, f.where, f.selfMs.toFixed(0), f.selfPct.toFixed(1), f.topCaller]),
      ),
    );
    parts.push('');
  }
  return parts.join('\n');
}
