/**
 * The issue's goals, judged for every sidecar row (one line per goal per sidecar Node). Goals
 * against HAProxy are judged on the median over rounds of the per-round paired figure (sidecar /
 * HAProxy of the same round, or sidecar - HAProxy for the p50); absolute goals on the median over
 * rounds of the sidecar's own figure. Every line shows the spread it was judged from.
 */
import type { Spread } from '../lib/stats.js';
import { MEMORY_STEPS } from '../scenarios/memory.js';
import { findPaired } from '../scenarios/summary.js';
import type { Roster, ScenarioResult } from '../scenarios/types.js';
import { formatNumber, formatSpread } from './table.js';

interface GoalDef {
  readonly id: string;
  /** Short name for the summary table (docs/performance.md). */
  readonly short: string;
  /** The threshold as the summary table (docs/performance.md) writes it. */
  readonly readme: string;
  readonly goal: string;
  readonly scenario: string;
  readonly metric: string;
  /** paired: judged on the paired figure against HAProxy; absolute: on the row's own figure. */
  readonly judge: 'ratio' | 'diff' | 'absolute';
  readonly cmp: '<=' | '>=' | '<';
  readonly limit: number;
  readonly unit: string;
  readonly digits: number;
  /** How the missed part reads, from the judged value and the goal's limit. */
  shortfall(value: number, limit: number): string;
}

const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;

export const GOALS: readonly GoalDef[] = [
  {
    id: 'stream-cpu',
    readme: '≤ 2x HAProxy',
    short: 'Streaming: CPU per message vs HAProxy (50-token run)',
    goal: "streaming CPU per message <= 2x HAProxy's (50-token run)",
    scenario: 'streaming',
    metric: 'cpuUsPerMsg50',
    judge: 'ratio',
    cmp: '<=',
    limit: 2,
    unit: 'us/msg',
    digits: 2,
    shortfall: (v, limit) => `needs ${pct(1 - limit / v)} less CPU per message`,
  },
  {
    id: 'stream-p50',
    readme: '≤ HAProxy + 0.3 ms',
    short: 'Streaming: p50 latency minus HAProxy p50',
    goal: "streaming latency p50 <= HAProxy's p50 + 0.3 ms (50-token run)",
    scenario: 'streaming',
    metric: 'p50Us50',
    judge: 'diff',
    cmp: '<=',
    limit: 300,
    unit: 'us',
    digits: 0,
    shortfall: (v, limit) => `${formatNumber(v - limit)} us over`,
  },
  {
    id: 'stream-p99',
    readme: "≤ HAProxy's p99",
    short: 'Streaming: p99 latency vs HAProxy p99',
    goal: "streaming latency p99 <= HAProxy's p99 (50-token run)",
    scenario: 'streaming',
    metric: 'p99Us50',
    judge: 'ratio',
    cmp: '<=',
    limit: 1,
    unit: 'us',
    digits: 0,
    shortfall: (v, limit) => `${pct(v - limit)} above HAProxy's p99`,
  },
  {
    id: 'unary-cpu',
    readme: '≤ 4x HAProxy',
    short: 'Unary 100 B: CPU per call vs HAProxy',
    goal: "unary 100 B CPU per call <= 4x HAProxy's",
    scenario: 'unary',
    metric: 'cpuUsPerCall',
    judge: 'ratio',
    cmp: '<=',
    limit: 4,
    unit: 'us/call',
    digits: 1,
    shortfall: (v, limit) => `needs ${pct(1 - limit / v)} less CPU per call`,
  },
  {
    id: 'unary-rps',
    readme: '≥ 0.5x HAProxy',
    short: 'Unary 100 B: req/s vs HAProxy',
    goal: "unary 100 B req/s >= 0.5x HAProxy's",
    scenario: 'unary',
    metric: 'reqPerSec',
    judge: 'ratio',
    cmp: '>=',
    limit: 0.5,
    unit: 'req/s',
    digits: 0,
    shortfall: (v, limit) => `needs ${formatNumber(limit / v, 2)}x the req/s`,
  },
  {
    id: 'reject-cpu',
    readme: "≤ 2x HAProxy's per 503",
    short: 'Rejection: CPU per rejected call vs HAProxy per 503',
    goal: "rejection CPU per rejected call <= 2x HAProxy's per 503",
    scenario: 'overload',
    metric: 'cpuUsPerRejection',
    judge: 'ratio',
    cmp: '<=',
    limit: 2,
    unit: 'us/rejection',
    digits: 1,
    shortfall: (v, limit) => `needs ${pct(1 - limit / v)} less CPU per rejection`,
  },
  {
    id: 'reject-p99',
    readme: '< 2 ms',
    short: 'Rejection: time to RESOURCE_EXHAUSTED p99',
    goal: 'time to RESOURCE_EXHAUSTED p99 < 2 ms',
    scenario: 'overload',
    metric: 'rejectP99Us',
    judge: 'absolute',
    cmp: '<',
    limit: 2000,
    unit: 'us',
    digits: 0,
    shortfall: (v, limit) => `${formatNumber(v - limit)} us over`,
  },
  {
    id: 'rss-1000',
    readme: '≤ 100 MB',
    short: 'RSS at 1,000 held streams',
    goal: 'RSS <= 100 MB at 1,000 held streams',
    scenario: 'memory',
    metric: 'rssSmallMB',
    judge: 'absolute',
    cmp: '<=',
    limit: 100,
    unit: 'MB',
    digits: 1,
    shortfall: (v, limit) => `${formatNumber(v - limit, 1)} MB over`,
  },
  {
    id: 'bytes-per-stream',
    readme: '≤ 8 KB',
    short: 'Memory per additional stream, 1,000 -> 10,000',
    goal: 'RSS <= 8 KB (8,192 B) per additional stream from 1,000 to 10,000 held streams',
    scenario: 'memory',
    metric: 'bytesPerStream',
    judge: 'absolute',
    cmp: '<=',
    limit: 8192,
    unit: 'B',
    digits: 0,
    shortfall: (v, limit) => `${formatNumber(v - limit)} B over`,
  },
];

export interface GoalResult {
  readonly id: string;
  readonly short: string;
  readonly readme: string;
  readonly goal: string;
  readonly sidecar: string;
  readonly nodeVersion: string;
  readonly judge: GoalDef['judge'];
  readonly unit: string;
  readonly met: boolean | null;
  /** The judged value: median paired ratio / difference, or the median absolute figure. */
  readonly value: number;
  readonly spread: Spread | null;
  readonly threshold: string;
  readonly measured: string;
  readonly margin: string;
  readonly note?: string;
}

function meets(cmp: GoalDef['cmp'], v: number, limit: number): boolean {
  return cmp === '<=' ? v <= limit : cmp === '>=' ? v >= limit : v < limit;
}

function thresholdText(g: GoalDef): string {
  if (g.judge === 'ratio') return `${g.cmp} ${formatNumber(g.limit, 2)}x HAProxy`;
  if (g.judge === 'diff') return `${g.cmp} HAProxy + ${formatNumber(g.limit)} ${g.unit}`;
  return `${g.cmp} ${formatNumber(g.limit)} ${g.unit}`;
}

/** Whether the memory run used the goals' steps (a --quick run does not). */
function memoryStepsAreGoals(r: ScenarioResult): boolean {
  const steps = r.extra?.['steps'] as number[] | undefined;
  return steps?.[0] === MEMORY_STEPS[0] && steps?.[1] === MEMORY_STEPS[1];
}

function judge(g: GoalDef, results: readonly ScenarioResult[], sidecar: string, nodeVersion: string): GoalResult {
  const base = { id: g.id, short: g.short, readme: g.readme, goal: g.goal, sidecar, nodeVersion, judge: g.judge, unit: g.unit, threshold: thresholdText(g) };
  const r = results.find((x) => x.id === g.scenario);
  const row = r?.rows.find((x) => x.target === sidecar);
  const notRun = { ...base, met: null, value: NaN, spread: null, margin: '-' };
  if (!r || !row) return { ...notRun, measured: `not measured (scenario ${g.scenario} not run or no ${sidecar} row)` };
  const own = row.summary[g.metric];
  if (g.judge === 'absolute') {
    if (g.scenario === 'memory' && !memoryStepsAreGoals(r))
      return { ...notRun, measured: 'not judged: this run did not hold 1,000 and 10,000 streams (--quick)' };
    const v = own?.median ?? NaN;
    const met = Number.isFinite(v) ? meets(g.cmp, v, g.limit) : null;
    // The C proxies through the same client and upstream, for scale (and, for latency, the harness's floor).
    const refs = ['haproxy', 'nginx']
      .map((t) => [t, r.rows.find((x) => x.target === t)?.summary[g.metric]] as const)
      .filter(([, sp]) => sp && sp.n > 0)
      .map(([t, sp]) => `${t} ${formatSpread(sp, g.digits)} ${g.unit}`);
    return {
      ...base,
      met,
      value: v,
      spread: own ?? null,
      measured: `${formatSpread(own, g.digits)} ${g.unit} (median [min..max] over rounds)${refs.length ? `; for scale: ${refs.join(', ')}` : ''}`,
      margin: met === false ? g.shortfall(v, g.limit) : '-',
    };
  }
  const p = findPaired(r, sidecar, 'haproxy', g.metric);
  if (!p) return { ...notRun, measured: 'not judged: no HAProxy row to pair with' };
  const v = p.summary.median;
  const met = Number.isFinite(v) ? meets(g.cmp, v, g.limit) : null;
  const hap = r.rows.find((x) => x.target === 'haproxy')?.summary[g.metric];
  const what = g.judge === 'ratio' ? 'paired ratio' : `paired difference (${g.unit})`;
  return {
    ...base,
    met,
    value: v,
    spread: p.summary,
    measured: `${what} ${formatSpread(p.summary, g.judge === 'ratio' ? 2 : 0)}; ${sidecar} ${formatSpread(own, g.digits)} ${g.unit}, HAProxy ${formatSpread(hap, g.digits)} ${g.unit}`,
    margin:
      met === false
        ? `missed by ${formatNumber(g.judge === 'ratio' ? Math.abs(v - g.limit) : v - g.limit, g.judge === 'ratio' ? 2 : 0)}: ${g.shortfall(v, g.limit)}`
        : '-',
  };
}

export function evaluateGoals(results: readonly ScenarioResult[], roster: Roster): GoalResult[] {
  const out: GoalResult[] = [];
  for (const s of roster.sidecars.filter((x) => x.role === 'sidecar')) for (const g of GOALS) out.push(judge(g, results, s.label, s.nodeVersion));
  return out;
}

export function renderGoals(goals: readonly GoalResult[]): string {
  const lines = [
    '== Goals (against HAProxy: judged on the median over rounds of the per-round paired ratio or difference; absolute goals: median over rounds)',
  ];
  let last = '';
  for (const g of goals) {
    if (g.sidecar !== last) lines.push(`-- ${g.sidecar} (Node ${g.nodeVersion})`);
    last = g.sidecar;
    const tag = g.met === null ? 'n/a ' : g.met ? 'MET ' : 'MISS';
    lines.push(`[${tag}] ${g.goal}: ${g.measured}; threshold ${g.threshold}${g.met === false ? ` -- ${g.margin}` : ''}`);
  }
  return lines.join('\n');
}
