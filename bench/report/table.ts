/**
 * Plain-text tables. Every figure over rounds prints as `median [min..max]`, so how much it moved
 * between rounds is always in sight; wide tables are split so each fits a terminal.
 */
import type { Spread } from '../lib/stats.js';
import type { ScenarioResult, Warmup } from '../scenarios/types.js';

const MAX_WIDTH = 160;
/** Other processes' CPU (in cores) from which a scenario is flagged as run on a busy machine. */
const FOREIGN_WARN_CORES = 0.1;

export function formatNumber(value: number | undefined | null, digits = 0): string {
  if (value === undefined || value === null || !Number.isFinite(value)) return '-';
  if (Math.abs(value) >= 1e6 && digits === 0) return `${(value / 1e6).toFixed(2)}M`;
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** `median [min..max]`, or just the value when there was one round. */
export function formatSpread(s: Spread | undefined, digits = 0): string {
  if (!s || s.n === 0) return '-';
  if (s.n === 1 || s.min === s.max) return formatNumber(s.median, digits);
  return `${formatNumber(s.median, digits)} [${formatNumber(s.min, digits)}..${formatNumber(s.max, digits)}]`;
}

export function renderTable(header: readonly string[], body: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** One table, split by columns (the first column repeated) so none is wider than MAX_WIDTH. */
function renderSplit(header: readonly string[], body: readonly (readonly string[])[]): string {
  const width = (i: number): number => Math.max(header[i]!.length, ...body.map((r) => (r[i] ?? '').length)) + 2;
  const parts: string[] = [];
  const emit = (cols: readonly number[]): void => {
    parts.push(
      renderTable(
        [header[0]!, ...cols.map((c) => header[c]!)],
        body.map((r) => [r[0]!, ...cols.map((c) => r[c] ?? '')]),
      ),
    );
  };
  let cols: number[] = [];
  let used = width(0);
  for (let i = 1; i < header.length; i++) {
    if (cols.length && used + width(i) > MAX_WIDTH) {
      emit(cols);
      cols = [];
      used = width(0);
    }
    cols.push(i);
    used += width(i);
  }
  if (cols.length) emit(cols);
  return parts.join('\n\n');
}

function renderWarmup(w: Warmup): string {
  if (w.settled === null) return `  warm-up ${w.target}: ${w.slices.length} slices of load (no proxy CPU to judge)`;
  const series = w.slices.map((v) => formatNumber(v, v < 10 ? 2 : 1)).join(' ');
  return `  warm-up ${w.target}: ${series} ${w.unit} -> ${w.settled ? 'settled' : 'NOT settled (cap reached)'}`;
}

function renderPaired(result: ScenarioResult, rounds: number): string[] {
  if (!result.paired.length) return [];
  const header = ['pair', 'figure', ...Array.from({ length: rounds }, (_, i) => `r${i + 1}`), 'median [min..max]'];
  const body = result.paired.map((p) => [
    `${p.numerator} ${p.op === 'ratio' ? '/' : '-'} ${p.denominator}`,
    p.label,
    ...Array.from({ length: rounds }, (_, i) => formatNumber(p.perRound[i], p.digits)),
    formatSpread(p.summary, p.digits),
  ]);
  return [`paired per round (a / b or a - b of the same round), then median [min..max] over rounds:`, renderSplit(header, body)];
}

export function renderScenario(result: ScenarioResult): string {
  const rounds = Math.max(0, ...result.rows.map((r) => r.rounds.length));
  const header = ['target', ...result.metrics.map((m) => m.label)];
  const body = result.rows.map((row) => [
    `${row.target} (n=${row.rounds.filter(Boolean).length})`,
    ...result.metrics.map((m) => formatSpread(row.summary[m.key], m.digits)),
  ]);
  const took = Number.isFinite(result.durationS) ? `, took ${result.durationS.toFixed(0)} s` : '';
  const parts = [`== ${result.title} (median [min..max] over rounds${took})`];
  const f = result.foreignLoad;
  if (f && f.cores >= FOREIGN_WARN_CORES)
    parts.push(`WARNING: other processes used ${f.cores.toFixed(2)} cores meanwhile (${f.top.join(', ')}): every figure here is skewed by them`);
  parts.push(renderSplit(header, body));
  const orders = result.extra?.['orders'] as string[][] | undefined;
  if (orders?.length && orders[0]!.length > 1) parts.push(`target order per round: ${orders.map((o) => o.join(' ')).join(' | ')}`);
  parts.push(...result.warmups.map(renderWarmup));
  parts.push(...renderPaired(result, rounds));
  parts.push(...result.method.map((m) => `  method: ${m}`));
  parts.push(...result.errors.map((e) => `  ERROR: ${e}`));
  return parts.join('\n');
}
