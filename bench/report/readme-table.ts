/**
 * The compact Markdown table of docs/performance.md (the README's, before it moved there): per
 * sidecar Node (and K, with --upstream-connections), each goal's judged figure (median paired
 * ratio, or median absolute figure) and whether it is met.
 */
import { formatNumber } from './table.js';
import type { GoalResult } from './goals.js';

function cell(g: GoalResult | undefined): string {
  if (!g || g.met === null) return 'n/a';
  const v = g.value;
  let figure: string;
  if (g.judge === 'ratio') figure = `${formatNumber(v, 2)}x`;
  else if (g.judge === 'diff') figure = `${v >= 0 ? '+' : ''}${formatNumber(v)} ${g.unit}`;
  else if (g.unit === 'us') figure = `${formatNumber(v / 1000, 2)} ms`;
  else figure = `${formatNumber(v, g.unit === 'MB' ? 1 : 0)} ${g.unit}`;
  return `${figure} ${g.met ? 'MET' : 'MISSED'}`;
}

export function renderReadmeTable(goals: readonly GoalResult[]): string {
  const sidecars: { label: string; node: string }[] = [];
  for (const g of goals) if (!sidecars.some((s) => s.label === g.sidecar)) sidecars.push({ label: g.sidecar, node: g.nodeVersion });
  const ids: string[] = [];
  for (const g of goals) if (!ids.includes(g.id)) ids.push(g.id);
  const lines = [
    // A row of --upstream-connections keeps its K in the heading: "Node 24.11.0 K=4".
    `| goal | threshold | ${sidecars.map((s) => `Node ${s.node.replace(/^v/, '')}${/ K=\d+$/.exec(s.label)?.[0] ?? ''}`).join(' | ')} |`,
    `|---|---|${sidecars.map(() => '---:').join('|')}|`,
  ];
  for (const id of ids) {
    const first = goals.find((g) => g.id === id)!;
    lines.push(`| ${first.short} | ${first.readme} | ${sidecars.map((s) => cell(goals.find((g) => g.id === id && g.sidecar === s.label))).join(' | ')} |`);
  }
  return lines.join('\n');
}
