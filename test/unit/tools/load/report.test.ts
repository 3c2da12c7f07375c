// Text renderings of a load run: the live progress line (with its bar on a TTY) and the
// summary table, row by row, including the rows that appear only in one mode.
import { describe, expect, it } from 'vitest';
import { formatProgress, formatSummary } from '../../../../src/tools/load/report.js';
import type { LoadProgress } from '../../../../src/tools/load/run.js';
import type { LoadSummary } from '../../../../src/tools/load/stats.js';

const progress = (over: Partial<LoadProgress> = {}): LoadProgress => ({
  elapsed_s: 1.25,
  sent: 12,
  completed: 9,
  rejected: 2,
  errors: 1,
  in_flight: 3,
  tokens_per_s: 41.6,
  fraction: 0.5,
  ...over,
});

const summary = (over: Partial<LoadSummary> = {}): LoadSummary => ({
  target: '127.0.0.1:50050',
  sent: 10,
  completed: 7,
  rejected: 2,
  errors: { UNAVAILABLE: 1 },
  retries: 0,
  ttft_ms: { p50: 1.5, p90: 12.345, p99: 100 },
  itl_ms: { p50: null, p90: null, p99: null },
  time_to_reject_ms: { p50: 0.5, p90: 0.8, p99: 1.2 },
  output_tokens: 448,
  tokens_per_s: 44.8,
  requests_per_s: 0.7,
  duration_s: 10,
  ...over,
});

/** The table's rows by label (the first 22 columns), value trimmed. */
function rows(text: string): Map<string, string> {
  return new Map(text.split('\n').map((line) => [line.slice(0, 22).trim(), line.slice(22).trim()]));
}

describe('formatProgress', () => {
  it('prints the counts, elapsed time to a tenth in six columns, and whole tokens/s', () => {
    expect(formatProgress(progress())).toBe('[   1.3s] sent 12 done 9 rejected 2 errors 1 in-flight 3 tok/s 42');
    expect(formatProgress(progress({ elapsed_s: 1234.56, tokens_per_s: 0.4 }))).toMatch(/^\[1234\.6s\] .* tok\/s 0$/);
  });

  it('puts a 24-column bar and the percentage done in front only when asked (a TTY)', () => {
    expect(formatProgress(progress({ fraction: 0.5 }), true)).toBe(`[${'#'.repeat(12)}${'-'.repeat(12)}]  50% ${formatProgress(progress())}`);
    expect(formatProgress(progress({ fraction: 0 }), true)).toMatch(/^\[-{24}\] {3}0% \[/);
    expect(formatProgress(progress({ fraction: 1 }), true)).toMatch(/^\[#{24}\] 100% \[/);
    expect(formatProgress(progress(), false)).not.toContain('#');
  });

  it('does not show 100% before the run is done', () => {
    expect(formatProgress(progress({ fraction: 0.999 }), true)).toMatch(/\] {2}99% \[/);
  });
});

describe('formatSummary', () => {
  it('prints one row per figure, padded to a column, and ends with a newline', () => {
    const text = formatSummary(summary());
    expect(text.endsWith('\n')).toBe(true);
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe(`${'target'.padEnd(22)}127.0.0.1:50050`);
    const r = rows(text);
    expect(r.get('duration (s)')).toBe('10.00');
    expect(r.get('sent')).toBe('10');
    expect(r.get('completed')).toBe('7');
    expect(r.get('rejected')).toBe('2 (RESOURCE_EXHAUSTED)');
    expect(r.get('errors')).toBe('1 (UNAVAILABLE 1)');
    expect(r.get('output tokens')).toBe('448');
    expect(r.get('tokens/s')).toBe('44.8');
    expect(r.get('requests/s')).toBe('0.70');
    expect(r.has('model')).toBe(false);
    expect(r.has('HTTP statuses')).toBe(false);
  });

  it('shows percentiles to two decimals in three columns, and - where there was no sample', () => {
    const lines = formatSummary(summary()).split('\n');
    expect(lines).toContain(`${''.padEnd(22)}       p50       p90       p99`);
    expect(lines).toContain(`${'TTFT (ms)'.padEnd(22)}      1.50     12.35    100.00`);
    expect(lines).toContain(`${'inter-token (ms)'.padEnd(22)}         -         -         -`);
  });

  it('says how many of the sent were retries, only when there were any', () => {
    expect(rows(formatSummary(summary({ sent: 12, retries: 3 }))).get('sent')).toBe('12 (3 retries)');
    expect(rows(formatSummary(summary({ retries: 0 }))).get('sent')).toBe('10');
  });

  it('totals the errors over every label, and prints 0 without errors', () => {
    expect(rows(formatSummary(summary({ errors: { CANCELLED: 4, HTTP_404: 1, NO_COMPLETE: 2 } }))).get('errors')).toBe(
      '7 (CANCELLED 4, HTTP_404 1, NO_COMPLETE 2)',
    );
    expect(rows(formatSummary(summary({ errors: {} }))).get('errors')).toBe('0');
  });

  it('in --openai mode names the model and API, what counted as rejected, and the HTTP statuses', () => {
    const text = formatSummary(summary({ model: 'qwen', api: 'chat', statuses: { '200': 7, '529': 2, '503': 1 } }), 'HTTP 529, 503');
    const r = rows(text);
    expect(r.get('model')).toBe('qwen (chat)');
    expect(r.get('rejected')).toBe('2 (HTTP 529, 503)');
    expect(r.get('HTTP statuses')).toBe('200 7, 503 1, 529 2');
    // The model row follows the target row.
    expect(text.split('\n')[1]).toMatch(/^model /);
    expect(rows(formatSummary(summary({ statuses: {} }))).get('HTTP statuses')).toBe('-');
  });

  it('says how many of the rejections were 429, a tenant at its cap, only when there were any', () => {
    expect(rows(formatSummary(summary({ rejected: 5, tenant_capped: 2 }), 'HTTP 529')).get('rejected')).toBe(
      '5 (HTTP 529; 2 of them HTTP 429, tenant at its in-flight cap)',
    );
    expect(rows(formatSummary(summary({ rejected: 5, tenant_capped: 0 }), 'HTTP 529')).get('rejected')).toBe('5 (HTTP 529)');
  });
});

describe('formatSummary with an SLO and refusals', () => {
  it('shows the time to reject when there were refusals, and the goodput line with its bounds', () => {
    const text = formatSummary(summary({ slo: { ttft_ms: 500, itl_ms: null, good: 6, goodput_per_s: 0.6 } }));
    expect(rows(text).get('time to reject (ms)')).toMatch(/^0\.50\s+0\.80\s+1\.20$/);
    expect(rows(text).get('goodput')).toBe('6 within the SLO (TTFT <= 500 ms, mean ITL <= - ms), 0.60/s');
    const plain = formatSummary(summary({ rejected: 0 }));
    expect(rows(plain).has('time to reject (ms)')).toBe(false);
    expect(rows(plain).has('goodput')).toBe(false);
  });
});
