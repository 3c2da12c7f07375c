/**
 * Who runs in this invocation: direct, the sidecar on the harness's Node ("sidecar"), one more
 * sidecar row per --sidecar-node binary (labelled with its version, "sidecar@node24.11.0"; by
 * default Node 24, fetched by .ci/node24.sh, so a plain run compares Node 20 and 24), each of
 * them split into one row per K of --upstream-connections ("sidecar@node24.11.0 K=4"), the
 * baseline@REV build with --baseline, HAProxy and nginx when installed, all filtered by --targets.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildBaseline } from '../lib/baseline.js';
import { has } from '../lib/machine.js';
import { REPO_ROOT, SIDECAR_MAIN } from '../lib/paths.js';
import type { BenchOptions, Roster, SidecarVariant } from '../scenarios/types.js';
import type { AdmissionSettings, TargetSpec } from './target.js';

export const HARNESS_SIDECAR = 'sidecar';
export const TARGET_KINDS = ['direct', 'sidecar', 'haproxy', 'nginx'] as const;

function nodeVersion(node: string): string {
  return execFileSync(node, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
}

function fetchNode24(log: (m: string) => void): string {
  log('bench: Node 24 for the sidecar@node24 row (.ci/node24.sh; --no-node24 skips it) ...');
  return execFileSync('bash', [join(REPO_ROOT, '.ci', 'node24.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 600_000 }).trim();
}

export function buildRoster(options: BenchOptions, log: (m: string) => void): Roster {
  const want = (kind: string): boolean => options.targets.includes(kind);
  const sidecars: SidecarVariant[] = [];
  if (want('sidecar')) {
    if (!existsSync(SIDECAR_MAIN)) throw new Error('dist/cli/main.js missing: run `npx tsc -p tsconfig.json` (npm run bench does it)');
    sidecars.push({ label: HARNESS_SIDECAR, role: 'sidecar', node: process.execPath, nodeVersion: process.version, main: SIDECAR_MAIN });
    const extra = [...options.sidecarNodes];
    if (extra.length === 0 && options.node24) extra.push(fetchNode24(log));
    for (const node of extra) {
      const version = nodeVersion(node);
      let label = `sidecar@node${version.replace(/^v/, '')}`;
      // The same version twice (e.g. --sidecar-node of the harness's own binary): keep labels unique.
      for (let i = 2; sidecars.some((s) => s.label === label); i++) label = `sidecar@node${version.replace(/^v/, '')}#${i}`;
      sidecars.push({ label, role: 'sidecar', node, nodeVersion: version, main: SIDECAR_MAIN });
    }
    if (options.upstreamConnections.length > 0) sidecars.splice(0, sidecars.length, ...perConnectionCount(sidecars, options.upstreamConnections));
  }
  if (options.baseline !== undefined) {
    const build = buildBaseline(options.baseline, log);
    sidecars.push({ label: `baseline@${build.rev}`, role: 'baseline', node: process.execPath, nodeVersion: process.version, main: build.main });
  }
  const haproxy = want('haproxy') && has('haproxy');
  const nginx = want('nginx') && has('nginx');
  if (want('haproxy') && !haproxy) log('bench: haproxy not installed, its rows are skipped (the goals need it)');
  if (want('nginx') && !nginx) log('bench: nginx not installed, its rows are skipped');
  return { direct: want('direct'), haproxy, nginx, sidecars };
}

/** One row per K for each sidecar row, in that order: "sidecar K=1", "sidecar K=4", "sidecar@node24.11.0 K=1", ... */
function perConnectionCount(sidecars: readonly SidecarVariant[], ks: readonly number[]): SidecarVariant[] {
  return sidecars.flatMap((s) => ks.map((k) => ({ ...s, label: `${s.label} K=${k}`, upstreamConnections: k })));
}

export interface SpecOptions {
  readonly direct: boolean;
  readonly sidecar?: AdmissionSettings | undefined;
  readonly haproxy?: AdmissionSettings | undefined;
  readonly nginx?: AdmissionSettings | undefined;
}

/** The scenario's targets in table order: direct, the sidecar rows, HAProxy, nginx. */
export function rosterSpecs(roster: Roster, o: SpecOptions): TargetSpec[] {
  const specs: TargetSpec[] = [];
  if (o.direct && roster.direct) specs.push({ name: 'direct', kind: 'direct' });
  for (const s of roster.sidecars) specs.push({ name: s.label, kind: 'sidecar', sidecar: s, ...(o.sidecar ? { admission: o.sidecar } : {}) });
  if (roster.haproxy) specs.push({ name: 'haproxy', kind: 'haproxy', ...(o.haproxy ? { admission: o.haproxy } : {}) });
  if (roster.nginx) specs.push({ name: 'nginx', kind: 'nginx', ...(o.nginx ? { admission: o.nginx } : {}) });
  return specs;
}
