/**
 * The order in which queued calls reach the engine, and whom a full queue gives up for a newcomer.
 * The gate (gate.ts) owns the counts and the limits; this owns only the order.
 *
 *   order       by priority (lower runs sooner, vLLM's order); within a priority, round-robin
 *               across tenants (deficit round robin where every call costs one slot, so one
 *               tenant's burst waits its turn behind the others' calls instead of ahead of them);
 *               within a tenant, FIFO. Calls without a tenant share one turn, so a sidecar that
 *               is sent neither header keeps the plain FIFO order it always had.
 *   starvation  at least one admission in every `starvationLimit + 1` from the queue goes to the
 *               call that has waited longest, whatever its priority or tenant. So a call with k
 *               calls queued before it is admitted within (k + 1) x (starvationLimit + 1)
 *               admissions from the queue, unless it leaves first (deadline, timeout, cancel, or
 *               displaced).
 *   displacing  when the queue is full, an arrival takes the place of
 *               - the newest call of the lowest priority below its own, else
 *               - the newest call of the tenant holding the most places at its own priority, when
 *                 that tenant holds at least two more than the arrival's tenant does (so two
 *                 tenants with equal shares never push each other out in turn);
 *               else nobody: the arrival is refused.
 *
 * Every operation is O(1) but the round's insertion point and the search for the tenant with the
 * most places (O(tenants queued at one priority)), and finding a priority's queue in the sorted
 * list (O(priorities queued), a handful in practice).
 */

/** Tenants a full queue names as refused; more are reported as every tenant. */
export const MAX_LISTED_TENANTS = 8;

/** What a queued call is: its priority (lower runs sooner) and tenant ('' for none). */
export interface CallClass {
  readonly priority: number;
  readonly tenant: string;
}

/** The class of a call that sends no priority and no tenant. */
export const DEFAULT_CALL_CLASS: CallClass = Object.freeze({ priority: 0, tenant: '' });

/** One queued call. The gate's Waiter extends it; the links are this module's. */
export class QueuedCall {
  /** Arrival order, across every priority and tenant (the starvation guard's "waited longest"). */
  older: QueuedCall | undefined;
  newer: QueuedCall | undefined;
  /** Arrival order within its priority (the newest is the one displaced). */
  olderInClass: QueuedCall | undefined;
  newerInClass: QueuedCall | undefined;
  /** FIFO within its tenant at its priority. */
  nextInTenant: QueuedCall | undefined;
  prevInTenant: QueuedCall | undefined;
  tenantQueue: TenantQueue | undefined;

  constructor(readonly callClass: CallClass) {}
}

class TenantQueue {
  head: QueuedCall | undefined;
  tail: QueuedCall | undefined;
  size = 0;

  constructor(
    readonly tenant: string,
    readonly priorityQueue: PriorityQueue,
  ) {}
}

class PriorityQueue {
  readonly tenants = new Map<string, TenantQueue>();
  /** Tenants with calls queued, in round order; `cursor` is the one whose turn is next. */
  readonly round: TenantQueue[] = [];
  cursor = 0;
  /** The priority's newest call (the one displaced); its older ones hang off it by olderInClass. */
  newest: QueuedCall | undefined;
  size = 0;

  constructor(readonly priority: number) {}
}

export class WaitingRoom {
  /** Queues with calls, by priority, most urgent first. */
  private readonly priorities: PriorityQueue[] = [];
  private readonly byPriority = new Map<number, PriorityQueue>();
  private oldest: QueuedCall | undefined;
  private newest: QueuedCall | undefined;
  private count = 0;
  /** Admissions from the queue in a row that did not go to the call waiting longest. */
  private passedOver = 0;

  /** @param starvationLimit the most admissions in a row that may pass over the call waiting longest (>= 1). */
  constructor(private readonly starvationLimit: number) {
    checkStarvationLimit(starvationLimit);
  }

  get size(): number {
    return this.count;
  }

  add(call: QueuedCall): void {
    const { priority, tenant } = call.callClass;
    let queue = this.byPriority.get(priority);
    if (!queue) {
      queue = new PriorityQueue(priority);
      this.byPriority.set(priority, queue);
      let at = this.priorities.length;
      while (at > 0 && this.priorities[at - 1]!.priority > priority) at--;
      this.priorities.splice(at, 0, queue);
    }
    let tenantQueue = queue.tenants.get(tenant);
    if (!tenantQueue) {
      tenantQueue = new TenantQueue(tenant, queue);
      queue.tenants.set(tenant, tenantQueue);
    }
    if (tenantQueue.size === 0) joinRound(queue, tenantQueue);
    call.tenantQueue = tenantQueue;
    call.prevInTenant = tenantQueue.tail;
    if (tenantQueue.tail) tenantQueue.tail.nextInTenant = call;
    else tenantQueue.head = call;
    tenantQueue.tail = call;
    tenantQueue.size++;
    call.olderInClass = queue.newest;
    if (queue.newest) queue.newest.newerInClass = call;
    queue.newest = call;
    queue.size++;
    call.older = this.newest;
    if (this.newest) this.newest.newer = call;
    else this.oldest = call;
    this.newest = call;
    this.count++;
  }

  /** Takes `call` out (cancelled, timed out, displaced); a no-op for a call not queued here. */
  remove(call: QueuedCall): void {
    const tenantQueue = call.tenantQueue;
    if (!tenantQueue) return;
    const queue = tenantQueue.priorityQueue;
    call.tenantQueue = undefined;
    if (call.prevInTenant) call.prevInTenant.nextInTenant = call.nextInTenant;
    else tenantQueue.head = call.nextInTenant;
    if (call.nextInTenant) call.nextInTenant.prevInTenant = call.prevInTenant;
    else tenantQueue.tail = call.prevInTenant;
    call.prevInTenant = call.nextInTenant = undefined;
    if (--tenantQueue.size === 0) {
      leaveRound(queue, tenantQueue);
      queue.tenants.delete(tenantQueue.tenant);
    }
    if (call.olderInClass) call.olderInClass.newerInClass = call.newerInClass;
    if (call.newerInClass) call.newerInClass.olderInClass = call.olderInClass;
    else queue.newest = call.olderInClass;
    call.olderInClass = call.newerInClass = undefined;
    if (--queue.size === 0) {
      this.byPriority.delete(queue.priority);
      this.priorities.splice(this.priorities.indexOf(queue), 1);
    }
    if (call.older) call.older.newer = call.newer;
    else this.oldest = call.newer;
    if (call.newer) call.newer.older = call.older;
    else this.newest = call.older;
    call.older = call.newer = undefined;
    this.count--;
  }

  /** The call takeNext would take, left in place; undefined when none waits. */
  peekNext(): QueuedCall | undefined {
    const longest = this.oldest;
    if (!longest || this.passedOver >= this.starvationLimit) return longest;
    const queue = this.priorities[0]!;
    return queue.round[queue.cursor]!.head!;
  }

  /** Takes out and returns the call that gets the next free slot; undefined when none waits. */
  takeNext(): QueuedCall | undefined {
    const call = this.peekNext();
    if (!call) return undefined;
    if (this.passedOver < this.starvationLimit) {
      const queue = this.priorities[0]!;
      // The tenant had its turn: the next one in the round is up (if this call empties the
      // tenant, leaving the round moves the cursor onto the next one by itself).
      if (queue.round[queue.cursor]!.size > 1) queue.cursor = (queue.cursor + 1) % queue.round.length;
    }
    this.passedOver = call === this.oldest ? 0 : this.passedOver + 1;
    this.remove(call);
    return call;
  }

  /** Whom an arrival of `callClass` would take the place of in a full queue (see the header); undefined: nobody. */
  displaceableBy(callClass: CallClass): QueuedCall | undefined {
    const lowest = this.priorities[this.priorities.length - 1];
    if (!lowest || lowest.priority < callClass.priority) return undefined;
    if (lowest.priority > callClass.priority) return lowest.newest;
    const own = lowest.tenants.get(callClass.tenant)?.size ?? 0;
    let most: TenantQueue | undefined;
    for (const tenantQueue of lowest.round) if (!most || tenantQueue.size > most.size) most = tenantQueue;
    return most && most.size >= own + 2 ? most.tail : undefined;
  }

  /**
   * Calls that would be admitted before a call of `callClass` queued now: every call of a more
   * urgent priority, and at its own priority its place in the round: each other tenant's calls
   * up to one more than its own tenant has queued (the round-robin serves them in turn).
   */
  queuedAhead(callClass: CallClass): number {
    let ahead = 0;
    for (const queue of this.priorities) {
      if (queue.priority > callClass.priority) break;
      if (queue.priority < callClass.priority) {
        ahead += queue.size;
        continue;
      }
      const own = queue.tenants.get(callClass.tenant)?.size ?? 0;
      for (const tenantQueue of queue.round) ahead += tenantQueue.tenant === callClass.tenant ? own : Math.min(tenantQueue.size, own + 1);
    }
    return ahead;
  }

  /**
   * For a full queue: whom it refuses. Calls of `priority` or less urgent, and, when `tenants` is
   * not null, only those of these tenants (at `priority` the others would displace a call of a
   * tenant holding more places). An arrival more urgent than `priority` would displace a call.
   * `tenants` null: every tenant (every tenant holds at most one place, or too many to list).
   */
  refusedWhenFull(): { priority: number; tenants: string[] | null } | undefined {
    const lowest = this.priorities[this.priorities.length - 1];
    if (!lowest) return undefined;
    let most = 0;
    for (const tenantQueue of lowest.round) most = Math.max(most, tenantQueue.size);
    if (most < 2) return { priority: lowest.priority, tenants: null };
    const tenants = lowest.round
      .filter((tenantQueue) => tenantQueue.size >= most - 1)
      .map((tenantQueue) => tenantQueue.tenant)
      .sort();
    return { priority: lowest.priority, tenants: tenants.length > MAX_LISTED_TENANTS ? null : tenants };
  }

  /** Calls queued per priority, most urgent first (for the metrics). */
  sizesByPriority(): [priority: number, queued: number][] {
    return this.priorities.map((queue) => [queue.priority, queue.size]);
  }
}

/** A tenant with calls again joins the round last: just before the one whose turn is next. */
function joinRound(queue: PriorityQueue, tenantQueue: TenantQueue): void {
  if (queue.round.length === 0) {
    queue.round.push(tenantQueue);
    queue.cursor = 0;
    return;
  }
  queue.round.splice(queue.cursor, 0, tenantQueue);
  queue.cursor++;
}

function leaveRound(queue: PriorityQueue, tenantQueue: TenantQueue): void {
  const at = queue.round.indexOf(tenantQueue);
  queue.round.splice(at, 1);
  if (at < queue.cursor) queue.cursor--;
  if (queue.cursor >= queue.round.length) queue.cursor = 0;
}

function checkStarvationLimit(limit: number): void {
  if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`starvation limit must be an integer >= 1, got ${limit}`);
}
