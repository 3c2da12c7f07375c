/** The shape every scenario returns, and the small harness they share (interleaved rounds). */
import type { CpuPlan } from '../lib/affinity.js';
import { medianRecord } from '../lib/stats.js';

export interface BenchOptions {
  readonly quick: boolean;
  readonly rounds: number;
  readonly scenarios: readonly string[];
  readonly out: string | undefined;
  readonly profile: boolean;
  readonly pin: boolean;
}

export interface BenchContext {
  readonly options: BenchOptions;
  readonly plan: CpuPlan;
  /** Temp dir for configs, pid files, logs and profiles of this run. */
  readonly dir: string;
  readonly haveHaproxy: boolean;
  readonly haveNginx: boolean;
  log(message: string): void;
}

export interface MetricDef {
  readonly key: string;
  readonly label: string;
  readonly digits?: number;
}

export type Figures = Record<string, number>;

export interface Row {
  readonly target: string;
  readonly rounds: Figures[];
  median: Figures;
}

export interface Ratio {
  readonly label: string;
  readonly metric: string;
  readonly value: number;
}

export interface ScenarioResult {
  readonly id: string;
  readonly title: string;
  /** How each figure was measured, printed with the table. */
  readonly method: readonly string[];
  readonly metrics: readonly MetricDef[];
  readonly rows: Row[];
  ratios: Ratio[];
  readonly errors: string[];
  extra?: Record<string, unknown>;
}

/**
 * Runs `measure` for every target in every round, interleaved (A B C D A B C D ...) so drift of
 * the machine over the run hits all targets alike. A failing measurement is recorded and the
 * run goes on. Fills rows with per-round figures and their medians.
 */
export async function interleave(
  targets: readonly string[],
  rounds: number,
  rows: Row[],
  errors: string[],
  measure: (target: string, round: number) => Promise<Figures>,
): Promise<void> {
  for (const t of targets) if (!rows.some((r) => r.target === t)) rows.push({ target: t, rounds: [], median: {} });
  for (let round = 0; round < rounds; round++) {
    for (const target of targets) {
      try {
        rows.find((r) => r.target === target)!.rounds.push(await measure(target, round));
      } catch (err) {
        errors.push(`${target} round ${round + 1}: ${(err as Error).message.split('\n')[0]}`);
      }
    }
  }
  for (const row of rows) row.median = medianRecord(row.rounds);
}

/** sidecar-row / other-row for the given metrics (the three comparisons). */
export function sidecarRatios(rows: readonly Row[], metrics: readonly string[], sidecar = 'sidecar'): Ratio[] {
  const out: Ratio[] = [];
  const s = rows.find((r) => r.target === sidecar);
  if (!s) return out;
  for (const other of ['direct', 'haproxy', 'nginx']) {
    const o = rows.find((r) => r.target === other);
    if (!o) continue;
    for (const m of metrics) {
      const a = s.median[m];
      const b = o.median[m];
      out.push({ label: `${sidecar}/${other}`, metric: m, value: a !== undefined && b !== undefined && b !== 0 ? a / b : NaN });
    }
  }
  return out;
}

export function newResult(id: string, title: string, method: string[], metrics: MetricDef[]): ScenarioResult {
  return { id, title, method, metrics, rows: [], ratios: [], errors: [] };
}
