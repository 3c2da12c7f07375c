/** Starts any kind of target against a running upstream. */
import type { CpuPlan } from '../lib/affinity.js';
import { startHaproxy } from './haproxy.js';
import { startNginx } from './nginx.js';
import { startSidecar } from './sidecar.js';
import type { Target, TargetSpec } from './target.js';

export { NEVER_REJECT, type Target, type TargetSpec } from './target.js';
import { startUpstream, type Upstream } from './upstream.js';

export async function startTarget(spec: TargetSpec, upstreamPort: number, plan: CpuPlan, dir: string): Promise<Target> {
  switch (spec.kind) {
    case 'direct':
      return { name: spec.name, kind: 'direct', port: upstreamPort, pid: undefined, stop: async () => {} };
    case 'sidecar':
      if (!spec.sidecar) throw new Error(`${spec.name}: sidecar target without a Node/build`);
      return startSidecar({ name: spec.name, variant: spec.sidecar, upstreamPort, admission: spec.admission, cpus: plan.proxy });
    case 'haproxy':
      return startHaproxy(spec.name, dir, upstreamPort, spec.admission, plan.proxy);
    case 'nginx':
      return startNginx(spec.name, dir, upstreamPort, spec.admission, plan.proxy);
  }
}

/** Starts every target (one at a time, so start-up noise does not overlap), stopping all on failure. */
export async function startTargets(specs: readonly TargetSpec[], upstreamPort: number, plan: CpuPlan, dir: string): Promise<Target[]> {
  const started: Target[] = [];
  try {
    for (const spec of specs) started.push(await startTarget(spec, upstreamPort, plan, dir));
    return started;
  } catch (err) {
    await stopTargets(started);
    throw err;
  }
}

export async function stopTargets(targets: readonly Target[]): Promise<void> {
  await Promise.all(targets.map((t) => t.stop().catch(() => {})));
}

/**
 * Runs `body` with the benchmark upstream and every target started (each scenario's setup),
 * and stops them all afterwards, whether `body` succeeds or throws.
 */
export async function withTargets<T>(
  specs: readonly TargetSpec[],
  plan: CpuPlan,
  dir: string,
  body: (targets: readonly Target[], upstream: Upstream) => Promise<T>,
): Promise<T> {
  const upstream = await startUpstream(plan.upstream);
  try {
    const targets = await startTargets(specs, upstream.port, plan, dir);
    try {
      return await body(targets, upstream);
    } finally {
      await stopTargets(targets);
    }
  } finally {
    await upstream.stop();
  }
}
