/**
 * The workers this frontend knows and their latest load, one entry per worker_id.
 *
 * Lifecycle of an entry (times in units of the worker's own heartbeat, from its events, else
 * the configured default):
 *   first report            -> known (routable once it has a model and an address)
 *   no report for > 3 beats -> its load is stale: unknown, which the busy rules treat as free
 *   no report for > 10 beats -> forgotten (NATS workers only; --worker ones stay, see below);
 *                              a rank silent that long while its worker reports others: dropped
 * A worker holds at most MAX_DP_RANKS ranks: a report of a further rank is refused (counted on
 * the worker) until silent ones are dropped. Applying a report costs O(1) amortized, however many
 * ranks the worker has (issue 36: a rescan of every rank per report made one 20,000-rank update
 * freeze the event loop for seconds).
 * While a source is down (NATS disconnected) its workers are neither stale-judged busy nor
 * forgotten: a broker outage must not empty the pool. On reconnect each gets a fresh window.
 *
 * Credits (worker-credit.ts): a worker whose events carry admit_now is sent no more calls than
 * that until its next event (WorkerPool.outOfCreditFor); its event's `overloaded` flag sets no lease, and a
 * refusal holds it out only until its next event or for its pushback, whichever comes first.
 *
 * Leases, all with the same length (--overload-lease-ms, default 1 s), for workers without credits:
 * - overloaded: set by a RESOURCE_EXHAUSTED from the worker's sidecar or by an event whose
 *   `overloaded` flag is true; cleared early by the next event with the flag false. Dynamo's
 *   mark had no expiry (its issues 12138, 14213: an idle worker stayed busy forever). It holds
 *   for whom the worker refuses (overloadScope): an event's overloaded_priority and
 *   overloaded_tenants, or the class of the request refused (added to a lease in force), so an
 *   urgent request, or one of a tenant the worker does not refuse, may still be sent to it.
 *   undefined: everyone.
 * - unreachable: set by an UNAVAILABLE; cleared early by the next push update (which proves the
 *   address answers), not by a NATS event (which does not).
 * A push-sourced worker whose stream is down is not routable until the stream is back.
 */
import { MAX_DP_RANKS } from '../../protocol/load-event.js';
import type { OverloadScope, RankReport } from './load-report.js';
import { WorkerCredit } from './worker-credit.js';

/** A request's class as the lease reads it (tenant undefined: anonymous, "" on the wire). */
export interface RequestClassRef {
  readonly priority: number;
  readonly tenant?: string | undefined;
}

/** Whether the worker's overload lease in force refuses a request of `request`. */
export function leasedFor(worker: WorkerState, now: number, request: RequestClassRef | undefined): boolean {
  return worker.overloadedUntil > now && refusesClass(worker.overloadScope, request);
}

function refusesClass(scope: OverloadScope | undefined, request: RequestClassRef | undefined): boolean {
  if (!scope || !request) return true;
  return request.priority >= scope.priority && (scope.tenants === null || scope.tenants.has(request.tenant ?? ''));
}

/** Both scopes' requests (undefined: everyone). */
function widenScope(a: OverloadScope | undefined, b: OverloadScope | undefined): OverloadScope | undefined {
  if (!a || !b) return undefined;
  return { priority: Math.min(a.priority, b.priority), tenants: a.tenants && b.tenants && new Set([...a.tenants, ...b.tenants]) };
}

export type LoadSource = 'nats' | 'push';

export const STALE_AFTER_HEARTBEATS = 3;
export const FORGET_AFTER_HEARTBEATS = 10;

export interface RankState {
  report: RankReport;
  receivedAt: number;
  /** Attempts this frontend has in flight at this rank, and their KV blocks. */
  inFlight: number;
  inFlightBlocks: number;
}

export interface WorkerState {
  readonly workerId: string;
  readonly source: LoadSource;
  address: string | undefined;
  model: string | undefined;
  heartbeatMs: number;
  readonly ranks: Map<number, RankState>;
  lastSeen: number;
  draining: boolean;
  overloadedUntil: number;
  /** Whom the overload refuses while overloadedUntil lasts (undefined: every request). */
  overloadScope: OverloadScope | undefined;
  /** When the worker's last refusal asked to be tried again (now + its pushback); 0 = it did not say. */
  retryAt: number;
  unreachableUntil: number;
  /** Push source only: the Watch stream is up. */
  connected: boolean;
  inFlight: number;
  /**
   * How many more calls the worker admits from this frontend until its next report (its
   * admit_now), and the calls and prompt tokens sent since that report.
   */
  readonly credit: WorkerCredit;
  /** Reports of a new rank refused because it had MAX_DP_RANKS already (its sources warn at the first). */
  ranksRefused: number;
}

export interface WorkerPoolOptions {
  /** Heartbeat assumed for workers whose events do not say (Dynamo's own events). */
  readonly defaultHeartbeatMs: number;
  readonly leaseMs: number;
  /** New workers beyond this many are refused (a rogue or misconfigured publisher must not grow memory and /metrics without bound). */
  readonly maxWorkers: number;
}

export class WorkerPool {
  private readonly workers = new Map<string, WorkerState>();
  private readonly sourceDown = new Set<LoadSource>();
  /**
   * Each worker's ranks from least to most recently reported (a Map keeps insertion order; a
   * report moves its rank to the end), so expiry looks only at the front. `ranks` itself stays in
   * the order ranks first appeared, which routing's ties follow.
   */
  private readonly byReceipt = new WeakMap<WorkerState, Map<number, RankState>>();

  constructor(private readonly options: WorkerPoolOptions) {}

  get size(): number {
    return this.workers.size;
  }

  all(): IterableIterator<WorkerState> {
    return this.workers.values();
  }

  get(workerId: string): WorkerState | undefined {
    return this.workers.get(workerId);
  }

  /**
   * Applies one rank's report; undefined when refused: it names a new worker and the pool is full, or a new rank of a
   * worker that has MAX_DP_RANKS (then `ranksRefused` counts it). `address` overrides the advertised one (a --worker
   * address is where this frontend actually reached the sidecar).
   */
  apply(report: RankReport, now: number, source: LoadSource, address?: string): WorkerState | undefined {
    let worker = this.workers.get(report.workerId);
    if (!worker) {
      if (this.workers.size >= this.options.maxWorkers) return undefined;
      worker = {
        workerId: report.workerId,
        source,
        address: undefined,
        model: undefined,
        heartbeatMs: this.options.defaultHeartbeatMs,
        ranks: new Map(),
        lastSeen: now,
        draining: false,
        overloadedUntil: 0,
        overloadScope: undefined,
        retryAt: 0,
        unreachableUntil: 0,
        connected: true,
        inFlight: 0,
        credit: new WorkerCredit(),
        ranksRefused: 0,
      };
      this.workers.set(report.workerId, worker);
    }
    let rank = worker.ranks.get(report.dpRank);
    if (!rank) {
      // Silent ranks go first: a worker whose ranks changed under the same worker_id gets room for its new ones.
      this.dropSilentRanks(worker, now);
      if (worker.ranks.size >= MAX_DP_RANKS) {
        worker.ranksRefused++;
        return undefined;
      }
    }
    // A --worker address is where this frontend reached the sidecar: a NATS event's advertised one does not replace it.
    const keepAddress = source === 'nats' && worker.source === 'push' && worker.address !== undefined;
    if (!keepAddress) worker.address = address ?? report.grpcAddress ?? worker.address;
    worker.model = report.model ?? worker.model;
    worker.heartbeatMs = report.heartbeatMs ?? worker.heartbeatMs;
    worker.lastSeen = now;
    worker.draining = report.draining;
    worker.overloadScope = report.overloadScope;
    worker.credit.report({ ...report, occupancy: (report.engineRequest ?? 0) + (report.requestQueue ?? 0) });
    // A worker that gives credits is held back by them (outOfCreditFor), not by a lease: the
    // next report, or its credit, says when it has room again.
    worker.overloadedUntil = report.overloaded && !worker.credit.reported ? now + this.options.leaseMs : 0;
    if (source === 'push') {
      worker.connected = true;
      worker.unreachableUntil = 0;
    }
    const order = this.receiptOrder(worker);
    if (rank) {
      rank.report = report;
      rank.receivedAt = now;
      order.delete(report.dpRank);
    } else {
      rank = { report, receivedAt: now, inFlight: 0, inFlightBlocks: 0 };
      worker.ranks.set(report.dpRank, rank);
    }
    order.set(report.dpRank, rank);
    this.dropSilentRanks(worker, now);
    return worker;
  }

  private receiptOrder(worker: WorkerState): Map<number, RankState> {
    let order = this.byReceipt.get(worker);
    if (!order) {
      order = new Map();
      this.byReceipt.set(worker, order);
    }
    return order;
  }

  /**
   * Ranks silent for FORGET_AFTER_HEARTBEATS while the worker reports others are gone (its dp
   * size shrank across a restart under the same worker_id, or a stray event named the rank).
   * Kept, their unknown load would count as free for ever: the worker could never be busy,
   * and the router would ask for the phantom rank. Oldest first, stopping at the first rank still
   * heard from: each rank is looked at once per report of it, not once per report of any rank.
   * (Should the wall clock step back, a rank stamped before the step holds the ones behind it
   * until it expires: they are dropped that much later, never wrongly.)
   */
  private dropSilentRanks(worker: WorkerState, now: number): void {
    const order = this.receiptOrder(worker);
    const window = FORGET_AFTER_HEARTBEATS * worker.heartbeatMs;
    for (const [index, rank] of order) {
      if (now - rank.receivedAt <= window) return;
      order.delete(index);
      worker.ranks.delete(index);
    }
  }

  /** The report of a rank if it is fresh, else undefined (unknown load = free). */
  freshReport(worker: WorkerState, rank: RankState, now: number): RankReport | undefined {
    if (this.sourceDown.has(worker.source) && worker.source === 'nats') return undefined;
    return now - rank.receivedAt > STALE_AFTER_HEARTBEATS * worker.heartbeatMs ? undefined : rank.report;
  }

  /**
   * The calls the worker still admits from this frontend (worker-credit.ts), while a report that
   * gave them is fresh; undefined when it gives no credit or its load is stale (a silent worker's
   * credit is unknown, as its load is).
   */
  creditOf(worker: WorkerState, now: number): number | undefined {
    const remaining = worker.credit.remaining;
    if (remaining === undefined) return undefined;
    for (const rank of worker.ranks.values()) if (this.freshReport(worker, rank, now) !== undefined) return remaining;
    return undefined;
  }

  /**
   * Whether the worker has no credit left for a request of `request`: none left (creditOf), and
   * the request is one its overload refuses (an urgent call may still displace a queued one, so
   * credit spent on less urgent calls does not hold it back).
   */
  outOfCreditFor(worker: WorkerState, now: number, request: RequestClassRef | undefined): boolean {
    return this.creditOf(worker, now) === 0 && refusesClass(worker.overloadScope, request);
  }

  /** The worker refused a request of `refused` (undefined: of unknown class, so everyone's). */
  markOverloaded(workerId: string, now: number, pushbackMs?: number, refused?: RequestClassRef): void {
    const worker = this.workers.get(workerId);
    if (!worker) return;
    const scope: OverloadScope | undefined = refused && { priority: refused.priority, tenants: new Set([refused.tenant ?? '']) };
    worker.overloadScope = worker.overloadedUntil > now ? widenScope(worker.overloadScope, scope) : scope;
    // A worker that gives credits is held out until its next report (apply() ends the lease) or
    // for its pushback, whichever comes first; the lease is only the bound when neither comes.
    const holdMs = worker.credit.reported && pushbackMs !== undefined ? Math.min(pushbackMs, this.options.leaseMs) : this.options.leaseMs;
    worker.overloadedUntil = now + holdMs;
    worker.retryAt = pushbackMs === undefined ? 0 : now + pushbackMs;
  }

  markUnreachable(workerId: string, now: number): void {
    const worker = this.workers.get(workerId);
    if (worker) worker.unreachableUntil = now + this.options.leaseMs;
  }

  /** The worker is gone for good (its push address now reports another worker_id). */
  forget(workerId: string): void {
    this.workers.delete(workerId);
  }

  /** A push stream ended: the worker stays known but is not routable until it is back. */
  disconnected(workerId: string): void {
    const worker = this.workers.get(workerId);
    if (worker) worker.connected = false;
  }

  /** Push-sourced workers whose stream is up. */
  connectedPushWorkers(): number {
    let n = 0;
    for (const worker of this.workers.values()) if (worker.source === 'push' && worker.connected) n++;
    return n;
  }

  /** Can take traffic now (before busy rules): address, model, reachable, not draining. */
  routable(worker: WorkerState, now: number): boolean {
    return (
      worker.address !== undefined &&
      worker.model !== undefined &&
      (worker.source !== 'push' || worker.connected) &&
      !worker.draining &&
      worker.unreachableUntil <= now
    );
  }

  /** A source went down or came back; coming back restarts every silence window of its workers. */
  setSourceUp(source: LoadSource, up: boolean, now: number): void {
    if (up) {
      if (!this.sourceDown.delete(source)) return;
      for (const worker of this.workers.values()) if (worker.source === source) worker.lastSeen = Math.max(worker.lastSeen, now);
    } else this.sourceDown.add(source);
  }

  /** Forgets NATS workers silent for FORGET_AFTER_HEARTBEATS while NATS is up; returns their ids. */
  sweep(now: number): string[] {
    if (this.sourceDown.has('nats')) return [];
    const forgotten: string[] = [];
    for (const worker of this.workers.values()) {
      if (worker.source === 'nats' && now - worker.lastSeen > FORGET_AFTER_HEARTBEATS * worker.heartbeatMs) {
        this.workers.delete(worker.workerId);
        forgotten.push(worker.workerId);
      }
    }
    return forgotten;
  }
}
