/**
 * One routing decision per attempt, from the worker pool, the model's thresholds and this
 * frontend's own in-flight counts:
 *
 *   no worker known                          -> no_workers   (503)
 *   no worker serves the model               -> unknown_model (404)
 *   none of its workers routable             -> unavailable  (503)
 *   routable ones all tried, worker-overloaded
 *   (lease), out of credit (admit_now spent,
 *   worker-credit.ts) or busy by the thresholds -> overloaded (529, with the counts why)
 *   (the thresholds times the scale of the request's priority class: priority-classes.ts)
 *   else one free worker, by --router-mode, and its least-loaded free dp rank
 *
 * Busy detection runs in every routing mode (in Dynamo only with --router-mode kv). Modes:
 * - predicted-ttft (default): lowest predicted time to first token (fastest() below); with no
 *   prediction known among the free workers (older sidecars, Dynamo's workers), least-loaded.
 * - round-robin: free workers in turn; random: uniformly among free workers.
 * - least-loaded: fewest calls, counting this frontend's attempts in flight plus the
 *   sidecar's reported engine_request + request_queue (a heuristic: the report lags and may
 *   already include some of ours; both only rank workers, never reject).
 * - kv: lowest KV usage, (kv_used_blocks ?? active_decode_blocks) + the blocks of this
 *   frontend's attempts in flight (prompt blocks; with trackOutputBlocks also output blocks),
 *   as a fraction of kv_total_blocks when known. Ties go round-robin in every mode.
 */
import type { Logger } from '../../platform/log.js';
import { judgeRank, judgeWorker, type MissingInput } from './busy-rules.js';
import type {
  BusyCheck,
  BusyRule,
  InFlight,
  InactiveCheck,
  OverloadDetails,
  RouteDecision,
  RouteTarget,
  Router,
  ThresholdApi,
  Thresholds,
} from './contracts.js';
import { tighterSlo } from '../../protocol/request-class.js';
import { requestTtftMs, type RankReport } from './load-report.js';
import { priorityClassOf, scaleThresholds } from './priority-classes.js';
import { leasedFor, type RankState, type RequestClassRef, type WorkerPool, type WorkerState } from './worker-pool.js';

export const ROUTER_MODES = ['predicted-ttft', 'round-robin', 'random', 'least-loaded', 'kv'] as const;
export type RouterMode = (typeof ROUTER_MODES)[number];

export interface RouterOptions {
  readonly mode: RouterMode;
  readonly kvBlockSize: number;
  readonly trackOutputBlocks: boolean;
  /** The fourth busy check: busy when the fresh predicted_ttft_ms exceeds it; null = off. */
  readonly maxPredictedTtftMs: number | null;
}

export interface RouterDeps {
  readonly pool: WorkerPool;
  /** Read at every decision, so a /busy_threshold change applies to the next request. */
  readonly thresholds: Pick<ThresholdApi, 'get' | 'priorityScales'>;
  readonly now: () => number;
  readonly random: () => number;
  readonly logger: Logger;
}

interface Candidate {
  readonly worker: WorkerState;
  /** Fresh reports of its ranks, by rank. */
  readonly fresh: ReadonlyMap<number, RankReport | undefined>;
}

export class WorkerRouter implements Router {
  private turn = 0;
  /** (worker, check, reason) already logged as unable to fire. */
  private readonly loggedMissing = new Set<string>();

  constructor(
    private readonly options: RouterOptions,
    private readonly deps: RouterDeps,
  ) {}

  get ttftSloMs(): number | null {
    return this.options.maxPredictedTtftMs;
  }

  models(): string[] {
    const models = new Set<string>();
    for (const worker of this.deps.pool.all()) if (worker.model !== undefined) models.add(worker.model);
    return [...models].sort();
  }

  ready(): boolean {
    const now = this.deps.now();
    for (const worker of this.deps.pool.all()) if (this.deps.pool.routable(worker, now)) return true;
    return false;
  }

  route(model: string, tried: ReadonlySet<string>, promptTokens: number, priority?: number, tenant?: string, ttftSloMs?: number): RouteDecision {
    const { pool } = this.deps;
    const now = this.deps.now();
    if (pool.size === 0) return { kind: 'no_workers' };
    const serving = [...pool.all()].filter((w) => w.model === model);
    if (serving.length === 0) return { kind: 'unknown_model' };
    const routable = serving.filter((w) => pool.routable(w, now));
    if (routable.length === 0) return { kind: 'unavailable', reason: `no reachable worker serves ${model}` };

    // The request's class scales every threshold, the fourth check's included (priority-classes.ts).
    const { scale } = priorityClassOf(this.deps.thresholds.priorityScales(model), priority);
    const thresholds = scaleThresholds(this.deps.thresholds.get(model), scale);
    // The TTFT SLO (--ttft-slo-ms), scaled by the class; a request's own (x-slo-ttft-ms) may only tighten it.
    const configured = this.options.maxPredictedTtftMs === null ? null : this.options.maxPredictedTtftMs * scale;
    const maxPredictedTtftMs = tighterSlo(configured, ttftSloMs) ?? null;
    const checks: Partial<Record<BusyRule, number>> = {};
    let busy = 0;
    let overloaded = 0;
    let noCredit = 0;
    let soonestRetryAt = Infinity;
    let triedCount = 0;
    const free: Candidate[] = [];
    for (const worker of routable) {
      if (tried.has(worker.workerId)) {
        triedCount++;
        continue;
      }
      const requestClass = priority === undefined ? undefined : { priority, tenant };
      if (leasedFor(worker, now, requestClass)) {
        overloaded++;
        if (worker.retryAt > now) soonestRetryAt = Math.min(soonestRetryAt, worker.retryAt);
        continue;
      }
      if (pool.outOfCreditFor(worker, now, requestClass)) {
        noCredit++;
        continue;
      }
      const fresh = this.freshRanks(worker, now);
      const verdict = judgeWorker([...fresh.values()], thresholds, maxPredictedTtftMs, promptTokens);
      this.logMissing(worker, verdict.missing);
      if (verdict.busy) {
        busy++;
        for (const check of verdict.fired) checks[check] = (checks[check] ?? 0) + 1;
        continue;
      }
      free.push({ worker, fresh });
    }
    if (free.length === 0) {
      const details: OverloadDetails = { workers: routable.length, busy, worker_overloaded: overloaded, no_credit: noCredit, tried: triedCount, checks };
      return soonestRetryAt === Infinity ? { kind: 'overloaded', details } : { kind: 'overloaded', details, retryAfterMs: soonestRetryAt - now };
    }
    const chosen = this.pick(free, promptTokens);
    return {
      kind: 'route',
      target: {
        workerId: chosen.worker.workerId,
        address: chosen.worker.address!,
        dpRank: this.pickRank(chosen, thresholds, maxPredictedTtftMs, promptTokens),
      },
    };
  }

  begin(target: RouteTarget, promptTokens: number): InFlight {
    const worker = this.deps.pool.get(target.workerId);
    const rank = worker?.ranks.get(target.dpRank);
    const blockSize = this.options.kvBlockSize;
    let blocks = Math.ceil(promptTokens / blockSize);
    let tokens = promptTokens;
    let ended = false;
    let endCredit: (() => void) | undefined;
    if (worker) {
      worker.inFlight++;
      endCredit = worker.credit.send(promptTokens);
    }
    if (rank) {
      rank.inFlight++;
      rank.inFlightBlocks += blocks;
    }
    return {
      outputTokens: (delta) => {
        if (ended || !this.options.trackOutputBlocks || !rank || delta <= 0) return;
        tokens += delta;
        const next = Math.ceil(tokens / blockSize);
        rank.inFlightBlocks += next - blocks;
        blocks = next;
      },
      end: () => {
        if (ended) return;
        ended = true;
        endCredit?.();
        if (worker) worker.inFlight--;
        if (rank) {
          rank.inFlight--;
          rank.inFlightBlocks -= blocks;
        }
      },
    };
  }

  workerRefused(target: RouteTarget, kind: 'overloaded' | 'unreachable', pushbackMs?: number, refused?: RequestClassRef): void {
    const now = this.deps.now();
    if (kind === 'overloaded') this.deps.pool.markOverloaded(target.workerId, now, pushbackMs, refused);
    else this.deps.pool.markUnreachable(target.workerId, now);
  }

  /** Per model: workers that can take traffic, and how many of them are busy by the thresholds (for metrics). */
  busySummary(): Map<string, { workers: number; busy: number }> {
    const now = this.deps.now();
    const summary = new Map<string, { workers: number; busy: number }>();
    for (const worker of this.deps.pool.all()) {
      if (worker.model === undefined || !this.deps.pool.routable(worker, now)) continue;
      const entry = summary.get(worker.model) ?? { workers: 0, busy: 0 };
      entry.workers++;
      const verdict = judgeWorker([...this.freshRanks(worker, now).values()], this.deps.thresholds.get(worker.model), this.options.maxPredictedTtftMs);
      if (verdict.busy) entry.busy++;
      summary.set(worker.model, entry);
    }
    return summary;
  }

  /** For /busy_threshold diagnostics: configured checks that cannot fire, and on which workers. */
  inactiveChecks(model: string, thresholds: Thresholds): InactiveCheck[] {
    const now = this.deps.now();
    const byCheck = new Map<string, { check: BusyCheck; reason: string; workers: string[] }>();
    for (const worker of this.deps.pool.all()) {
      if (worker.model !== model) continue;
      for (const report of this.freshRanks(worker, now).values()) {
        for (const missing of judgeRank(report, thresholds).missing) {
          const key = `${missing.check}\n${missing.reason}`;
          const entry = byCheck.get(key) ?? { ...missing, workers: [] };
          if (!entry.workers.includes(worker.workerId)) entry.workers.push(worker.workerId);
          byCheck.set(key, entry);
        }
      }
    }
    return [...byCheck.values()];
  }

  /** Every known rank: its fresh report, or undefined when stale (unknown load, free). */
  private freshRanks(worker: WorkerState, now: number): Map<number, RankReport | undefined> {
    const fresh = new Map<number, RankReport | undefined>();
    for (const [index, rank] of worker.ranks) fresh.set(index, this.deps.pool.freshReport(worker, rank, now));
    return fresh;
  }

  private pick(free: readonly Candidate[], promptTokens: number): Candidate {
    const start = this.turn++ % free.length;
    const rotated = [...free.slice(start), ...free.slice(0, start)];
    switch (this.options.mode) {
      case 'predicted-ttft':
        return fastest(rotated, promptTokens);
      case 'round-robin':
        return rotated[0]!;
      case 'random':
        return free[Math.min(free.length - 1, Math.floor(this.deps.random() * free.length))]!;
      case 'least-loaded':
        return minBy(rotated, leastLoaded);
      case 'kv':
        return minBy(rotated, (c) => this.kvLoad(c, promptTokens));
    }
  }

  private kvLoad(candidate: Candidate, promptTokens: number): number {
    let used = Math.ceil(promptTokens / this.options.kvBlockSize);
    let total = 0;
    for (const [index, rank] of candidate.worker.ranks) {
      const report = candidate.fresh.get(index);
      used += (report?.kvUsedBlocks ?? report?.activeDecodeBlocks ?? 0) + rank.inFlightBlocks;
      total += report?.kvTotalBlocks ?? 0;
    }
    return total > 0 ? used / total : used;
  }

  /** The free rank with the least load; rank 0 when the worker reported none. */
  private pickRank(candidate: Candidate, thresholds: Thresholds, maxPredictedTtftMs: number | null, promptTokens: number): number {
    let best: { index: number; load: number } | undefined;
    for (const [index, rank] of candidate.worker.ranks) {
      const report = candidate.fresh.get(index);
      if (judgeRank(report, thresholds, maxPredictedTtftMs, promptTokens).busy) continue;
      const load = rankLoad(rank, report);
      if (!best || load < best.load) best = { index, load };
    }
    return best?.index ?? 0;
  }

  private logMissing(worker: WorkerState, missing: readonly MissingInput[]): void {
    for (const m of missing) {
      const key = `${worker.workerId}\n${m.check}\n${m.reason}`;
      if (this.loggedMissing.has(key)) continue;
      this.loggedMissing.add(key);
      this.deps.logger.warn('busy check cannot fire on this worker', { worker_id: worker.workerId, model: worker.model, check: m.check, reason: m.reason });
    }
  }
}

/**
 * predicted-ttft: the free worker with the lowest score
 *
 *   max(P, 1 ms) * (1 + n)
 *
 * P: the worker's fresh predicted_ttft_ms (lowest over its ranks); n: attempts this frontend
 * sent it since that report, which P cannot include. Events come on change (5 ms debounce) and
 * every heartbeat, requests can come faster. What one more call adds to a worker's wait depends
 * on its free slots and its mean slot time, which the event does not carry, so the frontend takes
 * the pessimistic case: every call sent since the report is answered before this one, one after
 * another, each taking P. So:
 * - with no call sent since the reports (requests slower than events) it is the lowest P exactly;
 * - a burst between two reports is spread in proportion to 1/P (a worker predicted twice as fast
 *   takes twice as many), instead of all of it herding to the worker that was fastest at its
 *   last report; the next report corrects the guess (n restarts at 0);
 * - it has no tolerance to tune (scale-free); the 1 ms floor keeps a 0 prediction growing with n.
 * It over-spreads a burst when the fastest worker has free slots: it errs toward least-loaded.
 *
 * A worker whose sidecar publishes its prefill model (--ttft-slo-ms) is scored by the request's
 * own prediction instead (requestTtftMs: its prefill ahead, plus the prompt tokens of the calls
 * sent since the report, plus this prompt), without the (1 + n) guess: the tokens sent are counted.
 *
 * A worker with no prediction (a new sidecar before its first token, an older sidecar, a Dynamo
 * worker, a stale report) scores as the best known P, so it gets a share like the fastest one
 * and is never starved. With no prediction known at all, least-loaded. Ties keep the rotation.
 */
function fastest(rotated: readonly Candidate[], promptTokens: number): Candidate {
  const predictions = new Map(rotated.map((c) => [c, predictedTtft(c, promptTokens)]));
  const known = [...predictions.values()].flatMap((p) => (p === undefined ? [] : [p.ms]));
  if (known.length === 0) return minBy(rotated, leastLoaded);
  const best = Math.min(...known);
  return minBy(rotated, (c) => {
    const p = predictions.get(c);
    return p?.own ? p.ms : Math.max(p?.ms ?? best, 1) * (1 + c.worker.credit.sentSinceReport);
  });
}

/** The lowest prediction over the worker's fresh ranks, and whether it is the request's own (a published model). */
function predictedTtft(candidate: Candidate, promptTokens: number): { ms: number; own: boolean } | undefined {
  let lowest: { ms: number; own: boolean } | undefined;
  const sentTokens = candidate.worker.credit.sentTokensSinceReport;
  for (const report of candidate.fresh.values()) {
    if (!report) continue;
    const ms = requestTtftMs(report, promptTokens, sentTokens);
    if (ms !== undefined && (lowest === undefined || ms < lowest.ms)) lowest = { ms, own: report.ttftModel !== undefined };
  }
  return lowest;
}

function leastLoaded(candidate: Candidate): number {
  return candidate.worker.inFlight + reportedCalls(candidate);
}

function reportedCalls(candidate: Candidate): number {
  for (const report of candidate.fresh.values()) if (report) return (report.engineRequest ?? 0) + (report.requestQueue ?? 0);
  return 0;
}

function rankLoad(rank: RankState, report: RankReport | undefined): number {
  return rank.inFlightBlocks + (report?.activeDecodeBlocks ?? 0) + (report?.activePrefillTokens ?? 0) / 1e6;
}

function minBy<T>(items: readonly T[], score: (item: T) => number): T {
  let best: T = items[0] as T;
  let bestScore = score(best);
  for (const item of items.slice(1)) {
    const s = score(item);
    if (s < bestScore) {
      best = item;
      bestScore = s;
    }
  }
  return best;
}
