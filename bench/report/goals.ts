/** The compass goals of issue 5, judged against the measured medians: met or missed, with figures. */
import type { ScenarioResult } from '../scenarios/types.js';
import { formatNumber } from './table.js';

export interface GoalResult {
  readonly goal: string;
  readonly met: boolean | null;
  readonly measured: string;
  /** How far off when missed (or the margin when met). */
  readonly margin: string;
}

function fig(results: readonly ScenarioResult[], scenario: string, target: string, key: string): number {
  return results.find((r) => r.id === scenario)?.rows.find((r) => r.target === target)?.median[key] ?? NaN;
}

const pct = (x: number): string => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '-');

export function evaluateGoals(results: readonly ScenarioResult[]): GoalResult[] {
  const goals: GoalResult[] = [];
  const has = (id: string): boolean => results.some((r) => r.id === id && r.rows.length > 0);

  if (has('unary')) {
    for (const target of ['sidecar', 'sidecar+admission']) {
      const s = fig(results, 'unary', target, 'reqPerSec');
      const h = fig(results, 'unary', 'haproxy', 'reqPerSec');
      const d = fig(results, 'unary', 'direct', 'reqPerSec');
      const vsH = s / h;
      const vsD = s / d;
      const met = Number.isFinite(vsD) ? vsD >= 0.8 && (!Number.isFinite(vsH) || vsH >= 1) : null;
      goals.push({
        goal: `scenario 1 (${target}): req/s >= HAProxy and >= 80% of direct`,
        met,
        measured: `${formatNumber(s)} req/s = ${pct(vsH)} of HAProxy (${formatNumber(h)}), ${pct(vsD)} of direct (${formatNumber(d)})`,
        margin: met
          ? 'met'
          : `short by ${Number.isFinite(vsH) && vsH < 1 ? `${formatNumber(h - s)} req/s vs HAProxy` : ''}${vsD < 0.8 ? `${Number.isFinite(vsH) && vsH < 1 ? ', ' : ''}${formatNumber(0.8 * d - s)} req/s vs 80% of direct` : ''}`,
      });
    }
  }
  if (has('streaming')) {
    const perCore = fig(results, 'streaming', 'sidecar', 'msgPerCpuSec');
    const added = fig(results, 'streaming', 'sidecar', 'addedP99Us');
    const met = Number.isFinite(perCore) ? perCore >= 100_000 && added < 1000 : null;
    goals.push({
      goal: 'scenario 2: >= 100k forwarded msg/s per proxy core, added p99 < 1 ms',
      met,
      measured: `flood: ${formatNumber(perCore)} msg per proxy CPU-second (${formatNumber(fig(results, 'streaming', 'sidecar', 'cpuUsPerMsg'), 2)} us/msg, several messages per DATA chunk); paced, one message per chunk: ${formatNumber(fig(results, 'streaming', 'sidecar', 'pacedCpuUsPerMsg'), 2)} us/msg; added p99 ${formatNumber(added)} us (paced)`,
      margin: met
        ? 'met'
        : [
            perCore < 100_000 ? `throughput ${pct(perCore / 100_000)} of goal (needs <= 10 us/msg)` : '',
            added >= 1000 ? `added p99 ${formatNumber(added - 1000)} us over` : '',
          ]
            .filter(Boolean)
            .join('; '),
    });
  }
  if (has('memory')) {
    const small = results.find((r) => r.id === 'memory')?.extra?.['steps'] as number[] | undefined;
    const rss = fig(results, 'memory', 'sidecar', 'rssSmallMB');
    const met = small?.[0] === 1000 ? rss < 150 : null;
    goals.push({
      goal: 'scenario 4: sidecar RSS < 150 MB at 1,000 held streams',
      met,
      measured: `${formatNumber(rss, 1)} MB at ${small?.[0] ?? '?'} held streams${met === null ? ' (quick run: step is not 1,000, not judged)' : ''}`,
      margin: met === false ? `${formatNumber(rss - 150, 1)} MB over` : met ? `${formatNumber(150 - rss, 1)} MB under` : '-',
    });
  }
  if (has('gate')) {
    const pairs = fig(results, 'gate', 'fast path', 'pairsPerSec');
    const ops = fig(results, 'gate', 'fast path', 'opsPerSec');
    goals.push({
      goal: 'scenario 5: >= 5M gate ops/s (judged on acquire+release pairs/s, the stricter reading)',
      met: Number.isFinite(pairs) ? pairs >= 5e6 : null,
      measured: `${formatNumber(pairs)} pairs/s (${formatNumber(ops)} single ops/s)`,
      margin: pairs >= 5e6 ? `${(pairs / 5e6).toFixed(1)}x the goal` : `${pct(pairs / 5e6)} of goal`,
    });
  }
  return goals;
}

export function renderGoals(goals: readonly GoalResult[]): string {
  const lines = ['== Goals'];
  for (const g of goals)
    lines.push(`[${g.met === null ? 'n/a ' : g.met ? 'MET ' : 'MISS'}] ${g.goal}: ${g.measured}${g.met === false ? ` -- ${g.margin}` : ''}`);
  return lines.join('\n');
}
