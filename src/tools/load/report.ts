/** Text renderings of a load run: the live progress line and the final summary table. */
import type { LoadProgress } from './run.js';
import type { LoadSummary, Percentiles } from './stats.js';

const BAR_WIDTH = 24;

/** The live line; on a TTY it starts with a bar of how far the run is ([#####-----] 50%). */
export function formatProgress(p: LoadProgress, withBar = false): string {
  const filled = Math.round(p.fraction * BAR_WIDTH);
  const bar = withBar ? `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(p.fraction * 100)).padStart(3)}% ` : '';
  return (
    bar +
    `[${p.elapsed_s.toFixed(1).padStart(6)}s] sent ${p.sent} done ${p.completed} rejected ${p.rejected} ` +
    `errors ${p.errors} in-flight ${p.in_flight} tok/s ${Math.round(p.tokens_per_s)}`
  );
}

const ms = (v: number | null): string => (v === null ? '-' : v.toFixed(2));

function percentileRow(label: string, p: Percentiles): string {
  return `${label.padEnd(22)}${ms(p.p50).padStart(10)}${ms(p.p90).padStart(10)}${ms(p.p99).padStart(10)}`;
}

/** `rejectedAs` names what counted as a rejection: RESOURCE_EXHAUSTED, or e.g. "HTTP 529". */
export function formatSummary(s: LoadSummary, rejectedAs = 'RESOURCE_EXHAUSTED'): string {
  const errorList = Object.entries(s.errors);
  const errorsTotal = errorList.reduce((sum, [, n]) => sum + n, 0);
  const row = (label: string, value: string | number): string => `${label.padEnd(22)}${String(value)}`;
  const counts = (m: Record<string, number>): string =>
    Object.entries(m)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
  const lines = [
    row('target', s.target),
    ...(s.model === undefined ? [] : [row('model', `${s.model} (${s.api})`)]),
    row('duration (s)', s.duration_s.toFixed(2)),
    row('sent', `${s.sent}${s.retries > 0 ? ` (${s.retries} retries)` : ''}`),
    row('completed', s.completed),
    row('rejected', `${s.rejected} (${rejectedAs}${s.tenant_capped ? `; ${s.tenant_capped} of them HTTP 429, tenant at its in-flight cap` : ''})`),
    row('errors', errorList.length === 0 ? '0' : `${errorsTotal} (${counts(s.errors)})`),
    ...(s.statuses === undefined ? [] : [row('HTTP statuses', Object.keys(s.statuses).length === 0 ? '-' : counts(s.statuses))]),
    `${''.padEnd(22)}${'p50'.padStart(10)}${'p90'.padStart(10)}${'p99'.padStart(10)}`,
    percentileRow('TTFT (ms)', s.ttft_ms),
    percentileRow('inter-token (ms)', s.itl_ms),
    ...(s.rejected > 0 ? [percentileRow('time to reject (ms)', s.time_to_reject_ms)] : []),
    row('output tokens', s.output_tokens),
    row('tokens/s', s.tokens_per_s.toFixed(1)),
    row('requests/s', s.requests_per_s.toFixed(2)),
    ...(s.slo === undefined
      ? []
      : [
          row(
            'goodput',
            `${s.slo.good} within the SLO (TTFT <= ${s.slo.ttft_ms ?? '-'} ms, mean ITL <= ${s.slo.itl_ms ?? '-'} ms), ${s.slo.goodput_per_s.toFixed(2)}/s`,
          ),
        ]),
  ];
  return lines.join('\n') + '\n';
}
