/** Plain-text tables of medians and ratios, with each scenario's method printed beneath. */
import type { ScenarioResult } from '../scenarios/types.js';

export function formatNumber(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  if (Math.abs(value) >= 1e6 && digits === 0) return `${(value / 1e6).toFixed(2)}M`;
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function renderTable(header: readonly string[], body: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export function renderScenario(result: ScenarioResult): string {
  const header = ['target', ...result.metrics.map((m) => m.label)];
  const body = result.rows.map((row) => [`${row.target} (n=${row.rounds.length})`, ...result.metrics.map((m) => formatNumber(row.median[m.key], m.digits))]);
  const parts = [`== ${result.title} (medians over rounds)`, renderTable(header, body)];
  if (result.ratios.length) {
    const labelOf = (key: string): string => result.metrics.find((m) => m.key === key)?.label ?? key;
    parts.push(`ratios: ${result.ratios.map((r) => `${r.label} ${labelOf(r.metric)} ${formatNumber(r.value, 2)}`).join('; ')}`);
  }
  parts.push(...result.method.map((m) => `  method: ${m}`));
  parts.push(...result.errors.map((e) => `  ERROR: ${e}`));
  return parts.join('\n');
}
