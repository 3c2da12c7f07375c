/**
 * The frontend's fleet as its status page shows it: one row per known worker, with the state the
 * router would judge it in right now and why. Pure: reads the pool and thresholds, changes
 * nothing, and uses the same busy rules as routing (busy-rules.ts), so the page cannot disagree
 * with the router about who is busy.
 *
 * State, first that applies: draining; unreachable (its push stream is down, or an UNAVAILABLE
 * lease); leased (a RESOURCE_EXHAUSTED or an `overloaded` event, with the time left); no_credit
 * (this frontend sent it every call its last event admitted, worker-credit.ts); stale
 * (no fresh load on any rank: treated as free by routing); busy (every rank busy by a check);
 * free.
 */
import { judgeRank } from '../routing/busy-rules.js';
import type { BusyRule, PriorityScales, ThresholdApi, Thresholds } from '../routing/contracts.js';
import type { RankReport } from '../routing/load-report.js';
import type { WorkerPool, WorkerState } from '../routing/worker-pool.js';

export type WorkerStateName = 'free' | 'busy' | 'leased' | 'no_credit' | 'stale' | 'unreachable' | 'draining';

/** A check that fired on a rank: `value` went above `limit` (the threshold applied to the rank's capacity). */
export interface FiredCheck {
  readonly check: BusyRule;
  readonly rank: number;
  readonly value: number;
  readonly threshold: number;
  readonly limit: number;
}

export interface RankRow {
  readonly rank: number;
  readonly fresh: boolean;
  readonly usedBlocks: number | null;
  readonly totalBlocks: number | null;
  readonly prefillTokens: number | null;
  readonly predictedTtftMs: number | null;
  readonly busy: boolean;
}

export interface WorkerRow {
  readonly id: string;
  readonly address: string | null;
  readonly model: string | null;
  readonly source: 'nats' | 'push';
  readonly state: WorkerStateName;
  readonly fired: readonly FiredCheck[];
  /** ms left of an overloaded or unreachable lease, else null. */
  readonly leaseLeftMs: number | null;
  readonly lastEventAgeMs: number;
  readonly engineRequest: number | null;
  readonly engineRequestLimit: number | null;
  readonly requestQueue: number | null;
  /** This frontend's attempts in flight at the worker. */
  readonly inFlight: number;
  /** Calls the worker still admits from this frontend until its next event; null: it gives no credit. */
  readonly credit: number | null;
  readonly ranks: readonly RankRow[];
}

export interface ModelRow {
  readonly model: string;
  readonly thresholds: Thresholds;
  /** Priority classes scaling the thresholds (read-only here); the states above are at scale 1, a request without a priority. */
  readonly priorityScales: PriorityScales;
  readonly workers: number;
  readonly busy: number;
}

export interface FleetViewDeps {
  readonly pool: WorkerPool;
  readonly thresholds: Pick<ThresholdApi, 'get' | 'priorityScales'>;
  readonly maxPredictedTtftMs: number | null;
}

export function fleetView(deps: FleetViewDeps, now: number): { workers: WorkerRow[]; models: ModelRow[] } {
  const workers = [...deps.pool.all()].map((worker) => workerRow(deps, worker, now)).sort((a, b) => compareIds(a.id, b.id));
  const models = new Map<string, ModelRow>();
  for (const row of workers) {
    if (row.model === null) continue;
    const entry = models.get(row.model) ?? {
      model: row.model,
      thresholds: deps.thresholds.get(row.model),
      priorityScales: deps.thresholds.priorityScales(row.model),
      workers: 0,
      busy: 0,
    };
    models.set(row.model, { ...entry, workers: entry.workers + 1, busy: entry.busy + (row.state === 'busy' ? 1 : 0) });
  }
  return { workers, models: [...models.values()].sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0)) };
}

function workerRow(deps: FleetViewDeps, worker: WorkerState, now: number): WorkerRow {
  const thresholds = worker.model === undefined ? undefined : deps.thresholds.get(worker.model);
  const ranks: RankRow[] = [];
  const fired: FiredCheck[] = [];
  let anyFresh = false;
  let allBusy = worker.ranks.size > 0;
  let first: RankReport | undefined;
  for (const [index, state] of [...worker.ranks].sort((a, b) => a[0] - b[0])) {
    const report = deps.pool.freshReport(worker, state, now);
    const verdict = thresholds && report ? judgeRank(report, thresholds, deps.maxPredictedTtftMs) : undefined;
    anyFresh ||= report !== undefined;
    allBusy &&= verdict?.busy === true;
    first ??= report;
    if (verdict?.busy && report && thresholds)
      for (const check of verdict.fired) fired.push(firedCheck(check, index, report, thresholds, deps.maxPredictedTtftMs));
    const latest = state.report;
    ranks.push({
      rank: index,
      fresh: report !== undefined,
      usedBlocks: latest.kvUsedBlocks ?? latest.activeDecodeBlocks ?? null,
      totalBlocks: latest.kvTotalBlocks ?? null,
      prefillTokens: latest.activePrefillTokens ?? null,
      predictedTtftMs: latest.predictedTtftMs ?? null,
      busy: verdict?.busy === true,
    });
  }
  const pushDown = worker.source === 'push' && !worker.connected;
  let state: WorkerStateName;
  let leaseLeftMs: number | null = null;
  if (worker.draining) state = 'draining';
  else if (pushDown || worker.unreachableUntil > now) {
    state = 'unreachable';
    if (!pushDown) leaseLeftMs = worker.unreachableUntil - now;
  } else if (worker.overloadedUntil > now) {
    state = 'leased';
    leaseLeftMs = worker.overloadedUntil - now;
  } else if (deps.pool.creditOf(worker, now) === 0) state = 'no_credit';
  else if (!anyFresh) state = 'stale';
  else if (allBusy) state = 'busy';
  else state = 'free';
  return {
    id: worker.workerId,
    address: worker.address ?? null,
    model: worker.model ?? null,
    source: worker.source,
    state,
    fired: state === 'busy' ? fired : [],
    leaseLeftMs,
    lastEventAgeMs: Math.max(0, now - worker.lastSeen),
    engineRequest: first?.engineRequest ?? null,
    engineRequestLimit: first?.engineRequestLimit ?? null,
    requestQueue: first?.requestQueue ?? null,
    inFlight: worker.inFlight,
    credit: deps.pool.creditOf(worker, now) ?? null,
    ranks,
  };
}

/** The numbers behind one fired check, as busy-rules.ts compares them. */
function firedCheck(check: BusyRule, rank: number, report: RankReport, thresholds: Thresholds, maxPredictedTtftMs: number | null): FiredCheck {
  switch (check) {
    case 'active_decode_blocks_threshold': {
      const threshold = thresholds.active_decode_blocks_threshold ?? 0;
      return { check, rank, value: report.kvUsedBlocks ?? report.activeDecodeBlocks ?? 0, threshold, limit: threshold * (report.kvTotalBlocks ?? 0) };
    }
    case 'active_prefill_tokens_threshold': {
      const threshold = thresholds.active_prefill_tokens_threshold ?? 0;
      return { check, rank, value: report.activePrefillTokens ?? 0, threshold, limit: threshold };
    }
    case 'active_prefill_tokens_threshold_frac': {
      const threshold = thresholds.active_prefill_tokens_threshold_frac ?? 0;
      return { check, rank, value: report.activePrefillTokens ?? 0, threshold, limit: threshold * (report.maxNumBatchedTokens ?? 0) };
    }
    case 'max_predicted_ttft_ms':
      return { check, rank, value: report.predictedTtftMs ?? 0, threshold: maxPredictedTtftMs ?? 0, limit: maxPredictedTtftMs ?? 0 };
  }
}

/** Decimal ids in numeric order (u64 strings: shorter is smaller). */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}
