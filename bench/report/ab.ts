/**
 * The A/B section (--baseline REV): for every goal figure, the sidecar of this tree against the
 * baseline build, both on the harness's Node, as per-round paired ratios sidecar / baseline and
 * their median [min..max]. Below 1 means this tree uses less (CPU, latency, memory) or, for
 * req/s, serves less.
 */
import type { Roster, ScenarioResult } from '../scenarios/types.js';
import { HARNESS_SIDECAR } from '../targets/roster.js';
import { formatNumber, formatSpread, renderTable } from './table.js';

export function renderAb(results: readonly ScenarioResult[], roster: Roster): string {
  const base = roster.sidecars.find((s) => s.role === 'baseline');
  if (!base) return '';
  const rounds = Math.max(0, ...results.flatMap((r) => r.rows.map((row) => row.rounds.length)));
  const body: string[][] = [];
  for (const r of results) {
    for (const p of r.paired.filter((x) => x.numerator === HARNESS_SIDECAR && x.denominator === base.label)) {
      const b = r.rows.find((x) => x.target === base.label)?.summary[p.metric];
      const s = r.rows.find((x) => x.target === HARNESS_SIDECAR)?.summary[p.metric];
      const d = r.metrics.find((m) => m.key === p.metric)?.digits ?? 1;
      body.push([
        `${r.id}: ${p.label}`,
        formatSpread(b, d),
        formatSpread(s, d),
        ...Array.from({ length: rounds }, (_, i) => formatNumber(p.perRound[i], 3)),
        formatSpread(p.summary, 3),
      ]);
    }
  }
  if (!body.length) return `== A/B: no paired figures (is the ${HARNESS_SIDECAR} row in --targets?)`;
  return [
    `== A/B: ${HARNESS_SIDECAR} (this tree) / ${base.label}, both on Node ${base.nodeVersion}; per-round paired ratios, then median [min..max]`,
    renderTable(['figure', base.label, HARNESS_SIDECAR, ...Array.from({ length: rounds }, (_, i) => `r${i + 1}`), 'ratio median [min..max]'], body),
  ].join('\n');
}
