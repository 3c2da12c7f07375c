/**
 * CPU profiles of the sidecar under the loads of scenario 1 (unary) and scenario 2 (the
 * 50-token streaming run), one profiled sidecar (`node --cpu-prof`) per sidecar Node. Each load
 * gets the scenario's warm-up first (until its CPU per unit settles), and the profile is cut to the measured window only: the streaming
 * client reports its window edges in CLOCK_MONOTONIC, h2load's log gives the first request's
 * start and the last response's end (wall clock, converted). The sidecar is stopped with SIGTERM
 * (it exits 0, so V8 writes the profile).
 *
 * Clock check on every run: the profile's startTime must fall between the sidecar's spawn and
 * its listening line, and its endTime between SIGTERM and exit, both read with process.hrtime
 * here; if not, the windows would be cut at the wrong place and the report says so.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { epochToMonotonicOffsetUs } from '../lib/clock.js';
import { digestProfile, readProfile, type ProfileDigest, type ProfileWindow } from '../lib/profile.js';
import { settleRule } from '../lib/settle.js';
import { sleep } from '../lib/spawn.js';
import { formatNumber, renderTable } from '../report/table.js';
import { startSidecar, type SidecarTarget } from '../targets/sidecar.js';
import { NEVER_REJECT } from '../targets/target.js';
import { startUpstream } from '../targets/upstream.js';
import { SHORT_CALL, STREAM_CONCURRENCY, streamingSettleRule, streamRun } from './streaming.js';
import type { BenchContext, SidecarVariant } from './types.js';
import { UNARY_CLIENTS, UNARY_STREAMS, unaryDurationMs, unaryRun, unaryWarmup } from './unary.js';

export interface ProfileSummary {
  readonly sidecar: string;
  readonly nodeVersion: string;
  readonly scenario: string;
  readonly load: string;
  /** The profile's clock agreed with CLOCK_MONOTONIC (see the file comment). */
  readonly clockOk: boolean;
  /** The process's CPU over the same load as measured from /proc (all threads, kernel time included), ms. */
  readonly measuredCpuMs: number;
  readonly digest: ProfileDigest;
}

interface PendingWindow {
  readonly scenario: string;
  readonly load: string;
  readonly window: ProfileWindow;
  readonly measuredCpuMs: number;
}

export async function runProfiles(ctx: BenchContext): Promise<ProfileSummary[]> {
  const out: ProfileSummary[] = [];
  for (const variant of ctx.roster.sidecars.filter((s) => s.role === 'sidecar')) {
    ctx.log(`bench: CPU profile of ${variant.label} (${variant.nodeVersion}) ...`);
    out.push(...(await profileVariant(ctx, variant)));
  }
  return out;
}

async function profileVariant(ctx: BenchContext, variant: SidecarVariant): Promise<ProfileSummary[]> {
  const quick = ctx.options.quick;

  const dir = join(ctx.dir, `cpuprofile-${variant.label.replace(/[^\w.-]/g, '_')}`);
  mkdirSync(dir, { recursive: true });
  const upstream = await startUpstream(ctx.plan.upstream);
  const pending: PendingWindow[] = [];
  let stopNs: [bigint, bigint];
  let sidecar: SidecarTarget;
  try {
    sidecar = await startSidecar({
      name: `profile-${variant.label}`,
      variant,
      upstreamPort: upstream.port,
      admission: NEVER_REJECT,
      cpus: ctx.plan.proxy,
      cpuProfileDir: dir,
      profilerCpus: ctx.plan.upstream,
    });
    try {
      if (ctx.options.scenarios.includes('unary')) {
        const durationMs = unaryDurationMs(quick);
        await unaryWarmup(ctx, sidecar, settleRule(quick));
        const { r, cpuS } = await unaryRun(ctx, sidecar, durationMs);
        const offset = epochToMonotonicOffsetUs();
        pending.push({
          scenario: 'unary',
          load: `h2load -D ${durationMs}ms -c ${UNARY_CLIENTS} -m ${UNARY_STREAMS}, 100 B unary echo (first request start to last response end)`,
          window: { fromUs: r.firstStartEpochUs + offset, toUs: r.lastEndEpochUs + offset },
          measuredCpuMs: cpuS * 1000,
        });
      }
      if (ctx.options.scenarios.includes('streaming')) {
        await streamRun(sidecar, SHORT_CALL, quick, ctx.plan.client, streamingSettleRule(quick)); // warm-up until settled
        const r = await streamRun(sidecar, SHORT_CALL, quick, ctx.plan.client, null);
        const w = r.windows[0]!;
        pending.push({
          scenario: 'streaming',
          load: `${SHORT_CALL}-token calls, ${STREAM_CONCURRENCY} concurrent, one message per stream per 20 ms tick (the client's measured window)`,
          window: { fromUs: Number(BigInt(w.startNs) / 1000n), toUs: Number(BigInt(w.endNs) / 1000n) },
          measuredCpuMs: (w.cpuS ?? NaN) * 1000,
        });
      }
    } finally {
      const before = process.hrtime.bigint();
      await sidecar.stop();
      stopNs = [before, process.hrtime.bigint()];
    }
  } finally {
    await upstream.stop();
  }
  const profile = readProfile(await profileFile(dir));
  const us = (ns: bigint): number => Number(ns / 1000n);
  const clockOk =
    profile.startTime >= us(sidecar.spawnedNs) &&
    profile.startTime <= us(sidecar.listeningNs) &&
    profile.endTime >= us(stopNs[0]) &&
    profile.endTime <= us(stopNs[1]);
  if (!clockOk) ctx.log(`bench: profile clock check failed for ${variant.label}: profile ${profile.startTime}..${profile.endTime} us`);
  return pending.map((p) => ({
    sidecar: variant.label,
    nodeVersion: variant.nodeVersion,
    scenario: p.scenario,
    load: p.load,
    clockOk,
    measuredCpuMs: p.measuredCpuMs,
    digest: digestProfile(profile, p.window),
  }));
}

async function profileFile(dir: string): Promise<string> {
  for (let i = 0; i < 50; i++) {
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (file) return join(dir, file);
    await sleep(100);
  }
  throw new Error(`no .cpuprofile written in ${dir}`);
}

export function renderProfiles(profiles: readonly ProfileSummary[]): string {
  const parts: string[] = [];
  for (const p of profiles) {
    const d = p.digest;
    parts.push(
      `== ${p.sidecar} (${p.nodeVersion}) CPU profile, ${p.scenario}: ${p.load}; window ${formatNumber(d.windowMs)} ms, ${d.samples} samples; main thread busy ${formatNumber(d.busyMs)} ms of ${formatNumber(d.totalMs)} ms sampled, while /proc counts ${formatNumber(p.measuredCpuMs)} ms of process CPU (all threads and kernel time; ${p.scenario === 'unary' ? 'from just before h2load starts to just after it exits' : 'same window'}); profile clock = CLOCK_MONOTONIC: ${p.clockOk ? 'yes' : 'NO (window cut unreliable)'}`,
    );
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
