/**
 * AdmissionGate: N engine slots, at most F of them held by calls that have not yet had their
 * first token (the first-token limit, Infinity = off), and an overflow queue of Q waiters, in
 * the order of waiting-room.ts: by priority, round-robin across tenants, FIFO within a tenant,
 * with a bound on how long the call waiting longest can be passed over. A full queue may give a
 * queued call's place to a more urgent arrival (or to a tenant holding fewer places): the call
 * displaced is told so (OnAdmit.onDisplaced) and ends like a refused one.
 * Knows nothing of HTTP/2; the proxy asks it for a slot, tells the permit when the engine's first
 * message passed (firstToken), and releases it when the call has fully ended. N, Q and F can
 * change while calls run (setLimits: the admin API, SIGHUP).
 *
 * Why F: a call waiting for its first token in the engine is the one whose TTFT grows when more
 * are admitted (prefills share the engine's step budget, and its own waiting queue is FIFO
 * behind them); holding the excess here instead keeps them where they can be refused at once.
 *
 * With a budget (setBudget: the KV ledger of --ttft-slo-ms, kv-ledger.ts) a call also needs its
 * cost to fit: the gate tells the budget every move of a call that carries a cost, exactly once
 * each (queued, left the queue, took a slot, first token, gave the slot back), and the queue's
 * next waiter waits while its cost does not fit (strict order, as vLLM's FCFS scheduler stops at
 * the first request whose blocks do not fit).
 *
 * Invariants, true after every public method returns:
 *   0 <= awaitingFirst <= inEngine,  0 <= queued,
 *   queued > 0  =>  inEngine >= limit  or  awaitingFirst >= firstTokenLimit  or  the next waiter's cost does not fit;
 *   every waiter leaves the queue exactly once: admitted, cancelled, or displaced;
 *   inEngine and awaitingFirst only grow from below their limits (a call is admitted only while
 *   inEngine < limit and awaitingFirst < firstTokenLimit), and queued only from below queueLimit.
 * Without a lowering that is the steady-state form: inEngine <= limit, awaitingFirst <=
 * firstTokenLimit, queued <= queueLimit. After a lowering the counts may sit above the new limits
 * (calls already in the engine are never cancelled, waiters already queued are never dropped);
 * they only fall from there, and once a count is below its limit it never exceeds it again.
 * The third one is what makes the queue's order hold: a freed slot goes straight to the next
 * waiter, so a newcomer finds either a free slot with an empty queue, or no free slot. A
 * displacement takes one waiter out for each it lets in, so it never grows the queue.
 *
 * Node runs this on one thread, so the cap is exact without the Q-1 channel sizing Dynamo needs
 * for its dispatcher task (see docs/decisions.md, "An exact gate of our own").
 */
import { DEFAULT_PRIORITY_STARVATION_LIMIT } from '../config/sidecar-config.js';
import { DEFAULT_CALL_CLASS, QueuedCall, WaitingRoom, type CallClass } from './waiting-room.js';

/** Held from dispatch until the call ends. `release()` is idempotent: every exit path may call it. */
export interface Permit {
  /** The engine's first token for this call passed: its place under the first-token limit is free. Idempotent; implied by release(). */
  firstToken(): void;
  release(): void;
  readonly released: boolean;
}

/** A place in the queue. `cancel()` returns false when the waiter was already admitted (or cancelled). */
export interface QueueTicket {
  cancel(): boolean;
}

export type Admission =
  { readonly kind: 'admitted'; readonly permit: Permit } | { readonly kind: 'queued'; readonly ticket: QueueTicket } | { readonly kind: 'rejected' };

/**
 * Told with the permit when a queued waiter reaches a slot, or that it lost its place to a more
 * urgent arrival. An object rather than a function: a proxied call passes itself, so admitting a
 * call allocates no closure. Must not throw.
 */
export interface OnAdmit {
  onAdmitted(permit: Permit): void;
  /** Out of the queue for good (its place went to another call); the ticket is void. */
  onDisplaced(): void;
}

/**
 * What a call's cost counts against beside the slots (kv-ledger.ts). `fits` is asked before a call
 * with a cost is admitted; the rest are told, once per call and move. Must not throw.
 */
export interface AdmissionBudget<Cost> {
  fits(cost: Cost): boolean;
  queued(cost: Cost): void;
  /** Out of the queue without a slot (cancelled, displaced, timed out). */
  unqueued(cost: Cost): void;
  /** Took an engine slot (from the queue or at once). */
  take(cost: Cost): void;
  firstToken(cost: Cost): void;
  /** Gave its slot back. */
  give(cost: Cost): void;
}

const REJECTED: Admission = Object.freeze({ kind: 'rejected' });

class Waiter extends QueuedCall implements QueueTicket {
  waiting = true;

  constructor(
    private readonly unlink: (waiter: Waiter) => void,
    readonly onAdmit: OnAdmit,
    callClass: CallClass,
    readonly cost: unknown,
  ) {
    super(callClass);
  }

  cancel(): boolean {
    if (!this.waiting) return false;
    this.unlink(this);
    return true;
  }
}

class SlotPermit implements Permit {
  released = false;
  private awaitingFirst = true;

  constructor(
    private readonly gate: SlotOwner,
    private readonly cost: unknown,
  ) {}

  firstToken(): void {
    if (!this.awaitingFirst || this.released) return;
    this.awaitingFirst = false;
    this.gate.freeFirstToken(this.cost);
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.gate.freeSlot(this.awaitingFirst, this.cost);
    this.awaitingFirst = false;
  }
}

/** What a permit gives back to its gate. */
interface SlotOwner {
  freeFirstToken(cost: unknown): void;
  freeSlot(wasAwaitingFirst: boolean, cost: unknown): void;
}

export class AdmissionGate implements SlotOwner {
  private engineCount = 0;
  private awaitingFirstCount = 0;
  private readonly room: WaitingRoom;
  private handingOff = false;
  private readonly unlinkWaiter = (waiter: Waiter): void => this.unlink(waiter);

  private limitValue: number;
  private queueLimitValue: number;
  private firstTokenLimitValue: number;
  private budget: AdmissionBudget<unknown> | undefined;

  // Subscribers to every change of inEngine or queued (load reporting, the drain). An array, read
  // on the hot path; subscribing and unsubscribing are rare.
  private listeners: readonly (() => void)[] = [];

  /**
   * @param limit max calls in the engine; `Infinity` admits everything (admission off).
   * @param queueLimit max calls waiting; 0 means reject as soon as the engine is full.
   * @param firstTokenLimit max calls in the engine still waiting for their first token; `Infinity`: no such limit.
   * @param starvationLimit the most admissions from the queue in a row that may pass over the call waiting longest.
   */
  constructor(limit: number, queueLimit: number, firstTokenLimit = Infinity, starvationLimit = DEFAULT_PRIORITY_STARVATION_LIMIT) {
    checkLimits(limit, queueLimit, firstTokenLimit);
    this.room = new WaitingRoom(starvationLimit);
    this.limitValue = limit;
    this.queueLimitValue = queueLimit;
    this.firstTokenLimitValue = firstTokenLimit;
  }

  /** Max calls in the engine (N); `Infinity` when admission is off. */
  get limit(): number {
    return this.limitValue;
  }

  /** Max calls waiting (Q). */
  get queueLimit(): number {
    return this.queueLimitValue;
  }

  /** Max calls in the engine before their first token (F); `Infinity` when off. */
  get firstTokenLimit(): number {
    return this.firstTokenLimitValue;
  }

  /** Calls in the engine that have not had their first token yet. */
  get awaitingFirstToken(): number {
    return this.awaitingFirstCount;
  }

  /** Whether a call arriving now would be admitted at once by the counts alone (it would otherwise queue or be refused). */
  get hasRoom(): boolean {
    return this.room.size === 0 && this.roomInEngine();
  }

  /** Whether a call of this cost (undefined: none) arriving now would be admitted at once. */
  hasRoomFor(cost: unknown): boolean {
    return this.hasRoom && (cost === undefined || this.budget === undefined || this.budget.fits(cost));
  }

  /**
   * What calls' costs count against from now on (once, at start, before any call with a cost):
   * the KV ledger of --ttft-slo-ms. Calls without a cost are unaffected.
   */
  setBudget<Cost>(budget: AdmissionBudget<Cost>): void {
    this.budget = budget;
  }

  /** The budget has more room than before (a call ended elsewhere, the engine reported more blocks): the queue moves if it can. */
  budgetChanged(): void {
    if (this.handingOff) return;
    const before = this.room.size;
    this.handOff();
    if (this.room.size !== before) this.changed();
  }

  /**
   * Changes N and Q now, for the calls already here too:
   * - a higher N (or `Infinity`, admission off) admits queued calls at once, oldest first, until
   *   the engine is at the new N or the queue is empty;
   * - a lower N cancels nothing: calls in the engine finish, and nobody is admitted until fewer
   *   than the new N are in it;
   * - a lower Q drops no waiter: queued calls keep their place, and newcomers are refused until
   *   the queue is below the new Q;
   * - F as N: a higher one admits at once, a lower one cancels nothing.
   */
  setLimits(limit: number, queueLimit: number, firstTokenLimit = Infinity): void {
    checkLimits(limit, queueLimit, firstTokenLimit);
    this.limitValue = limit;
    this.queueLimitValue = queueLimit;
    this.firstTokenLimitValue = firstTokenLimit;
    if (this.handingOff) return; // the hand-off loop further up the stack reads the new limit
    this.handOff();
    this.changed();
  }

  /** Calls currently holding an engine slot. */
  get inEngine(): number {
    return this.engineCount;
  }

  /** Calls waiting in the overflow queue. */
  get queued(): number {
    return this.room.size;
  }

  /** Calls queued that a call of `callClass` queued now would wait behind (waiting-room.ts). */
  queuedAhead(callClass: CallClass): number {
    return this.room.queuedAhead(callClass);
  }

  /** While the gate is full: the calls it refuses (waiting-room.ts refusedWhenFull); undefined when it is not full. */
  refusedWhenFull(): { priority: number; tenants: string[] | null } | undefined {
    if (this.roomInEngine() || this.room.size < this.queueLimitValue) return undefined;
    return this.room.refusedWhenFull() ?? { priority: -Infinity, tenants: null };
  }

  /** Calls queued per priority, most urgent first. */
  queuedByPriority(): [priority: number, queued: number][] {
    return this.room.sizesByPriority();
  }

  /**
   * Calls `listener` after every change of inEngine or queued, until the returned function is
   * called. Keep it cheap: it runs on the hot path. Subscribing after construction lets the
   * composition root build the gate before what watches it.
   */
  subscribe(listener: () => void): () => void {
    this.listeners = [...this.listeners, listener];
    return () => {
      this.listeners = this.listeners.filter((each) => each !== listener);
    };
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  /**
   * Admit now (a free slot and nobody waiting), queue (room in the queue, or a place a full
   * queue gives up for this class: waiting-room.ts), or reject. `onAdmit` is only called for a
   * queued call, later: when it reaches a slot, or when it is displaced in turn.
   */
  acquire(onAdmit: OnAdmit, callClass: CallClass = DEFAULT_CALL_CLASS, cost?: unknown): Admission {
    if (this.hasRoomFor(cost)) {
      this.engineCount++;
      this.awaitingFirstCount++;
      if (cost !== undefined) this.budget?.take(cost);
      this.changed();
      return { kind: 'admitted', permit: new SlotPermit(this, cost) };
    }
    let displaced: Waiter | undefined;
    if (this.room.size >= this.queueLimitValue) {
      if (this.queueLimitValue === 0) return REJECTED;
      displaced = this.room.displaceableBy(callClass) as Waiter | undefined;
      if (!displaced) return REJECTED;
      displaced.waiting = false;
      this.room.remove(displaced);
      this.unbudget(displaced);
    }
    const waiter = new Waiter(this.unlinkWaiter, onAdmit, callClass, cost);
    this.room.add(waiter);
    if (cost !== undefined) this.budget?.queued(cost);
    this.changed();
    // Told last, with the queue already in its new state: its answer may run any code.
    displaced?.onAdmit.onDisplaced();
    return { kind: 'queued', ticket: waiter };
  }

  private unlink(waiter: Waiter): void {
    waiter.waiting = false;
    this.room.remove(waiter);
    this.unbudget(waiter);
    this.changed();
  }

  private unbudget(waiter: Waiter): void {
    if (waiter.cost !== undefined) this.budget?.unqueued(waiter.cost);
  }

  /** For SlotPermit only. */
  freeFirstToken(cost: unknown): void {
    this.awaitingFirstCount--;
    if (cost !== undefined) this.budget?.firstToken(cost);
    this.freed();
  }

  /** For SlotPermit only. */
  freeSlot(wasAwaitingFirst: boolean, cost: unknown): void {
    this.engineCount--;
    if (wasAwaitingFirst) this.awaitingFirstCount--;
    if (cost !== undefined) this.budget?.give(cost);
    this.freed();
  }

  private freed(): void {
    if (this.handingOff) return; // the loop below, further up the stack, hands this room on
    this.handOff();
    this.changed();
  }

  private roomInEngine(): boolean {
    return this.engineCount < this.limitValue && this.awaitingFirstCount < this.firstTokenLimitValue;
  }

  /** Room in the engine goes to the queue's next waiter (waiting-room.ts), until there is none or nobody waits. */
  private handOff(): void {
    this.handingOff = true;
    try {
      // A loop, not recursion: an onAdmit that releases at once (upstream refused) frees the
      // slot again, and the next waiter gets it here without growing the stack.
      while (this.room.size > 0 && this.roomInEngine()) {
        const next = this.room.peekNext() as Waiter;
        if (next.cost !== undefined && this.budget && !this.budget.fits(next.cost)) break; // strict order: it waits for room, and those behind it too
        const waiter = this.room.takeNext() as Waiter;
        waiter.waiting = false;
        this.engineCount++;
        this.awaitingFirstCount++;
        if (waiter.cost !== undefined) this.budget?.take(waiter.cost);
        waiter.onAdmit.onAdmitted(new SlotPermit(this, waiter.cost));
      }
    } finally {
      this.handingOff = false;
    }
  }
}

function checkLimits(limit: number, queueLimit: number, firstTokenLimit: number): void {
  if (!(limit >= 1)) throw new RangeError(`AdmissionGate limit must be >= 1, got ${limit}`);
  if (!(queueLimit >= 0)) throw new RangeError(`AdmissionGate queueLimit must be >= 0, got ${queueLimit}`);
  if (!(firstTokenLimit >= 1)) throw new RangeError(`AdmissionGate firstTokenLimit must be >= 1, got ${firstTokenLimit}`);
}
