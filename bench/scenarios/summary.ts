/**
 * From per-round figures to what the report prints: median [min..max] of every figure per row,
 * and paired figures. A paired figure is computed inside each round (sidecar / HAProxy of the
 * same round, or sidecar - direct for added latency) and only then summarised over rounds; two
 * noisy medians (of p99s, say) are never subtracted or divided.
 */
import { spread } from '../lib/stats.js';
import { HARNESS_SIDECAR } from '../targets/roster.js';
import type { PairDef, Paired, PairSpec, Roster, Row, ScenarioResult } from './types.js';

export function summarizeRows(rows: readonly Row[]): void {
  for (const row of rows) {
    const keys = new Set<string>();
    for (const r of row.rounds) if (r) for (const k of Object.keys(r)) keys.add(k);
    row.summary = {};
    for (const k of keys) row.summary[k] = spread(row.rounds.map((r) => r?.[k]));
  }
}

export function pairRows(a: Row, b: Row, def: PairDef): Paired {
  const perRound = a.rounds.map((ra, i) => {
    const x = ra?.[def.metric];
    const y = b.rounds[i]?.[def.metric];
    if (x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y)) return null;
    if (def.op === 'diff') return x - y;
    return y === 0 ? null : x / y;
  });
  return {
    numerator: a.target,
    denominator: b.target,
    metric: def.metric,
    op: def.op,
    label: def.label,
    digits: def.digits ?? (def.op === 'ratio' ? 2 : 0),
    perRound,
    summary: spread(perRound),
  };
}

/**
 * Every pairing the scenario asks for, plus the A/B: the sidecar row on the harness's Node /
 * baseline@REV (same Node, the other build) on each of `ab`, the scenario's goal figures.
 */
export function pairScenario(result: ScenarioResult, roster: Roster, specs: readonly PairSpec[], ab: readonly PairDef[]): void {
  const row = (name: string): Row | undefined => result.rows.find((r) => r.target === name && r.rounds.some(Boolean));
  const baseline = roster.sidecars.find((s) => s.role === 'baseline')?.label;
  const out: Paired[] = [];
  for (const spec of specs) {
    const den = row(spec.denominator);
    if (!den) continue;
    const nums =
      spec.numerators === 'sidecars'
        ? roster.sidecars.map((s) => s.label)
        : result.rows.map((r) => r.target).filter((t) => t !== 'direct' && t !== spec.denominator);
    for (const name of nums) {
      const num = row(name);
      if (num) for (const def of spec.defs) out.push(pairRows(num, den, def));
    }
  }
  const base = baseline ? row(baseline) : undefined;
  // The baseline runs on the harness's Node, so its A/B partner is the sidecar row on that Node.
  const harnessSidecar = row(HARNESS_SIDECAR);
  if (base && harnessSidecar) for (const def of ab) out.push(pairRows(harnessSidecar, base, { ...def, op: 'ratio' }));
  result.paired = out;
}

/** Finds one paired figure (for goals and the A/B section). */
export function findPaired(result: ScenarioResult | undefined, numerator: string, denominator: string, metric: string): Paired | undefined {
  return result?.paired.find((p) => p.numerator === numerator && p.denominator === denominator && p.metric === metric);
}
