/**
 * What the frontend's HTTP layer needs from worker routing and busy detection, and nothing
 * more. The HTTP layer (OpenAI routes, /busy_threshold, /ready) depends only on these
 * interfaces; `WorkerPool` (workers and their load), `ThresholdStore` (per-model thresholds)
 * and `Router` (one decision per attempt) implement them.
 */

/** The three busy checks, named as in Dynamo's `/busy_threshold` API and flags. */
export type BusyCheck = 'active_decode_blocks_threshold' | 'active_prefill_tokens_threshold' | 'active_prefill_tokens_threshold_frac';

export const BUSY_CHECKS: readonly BusyCheck[] = Object.freeze([
  'active_decode_blocks_threshold',
  'active_prefill_tokens_threshold',
  'active_prefill_tokens_threshold_frac',
]);

/**
 * What can make a worker busy: the three checks, and this project's optional fourth,
 * --max-predicted-ttft-ms (flag and env only: it is not one of Dynamo's /busy_threshold fields).
 */
export type BusyRule = BusyCheck | 'max_predicted_ttft_ms';

/** One model's thresholds in the `/busy_threshold` wire shape; null = that check is off. */
export interface Thresholds {
  readonly active_decode_blocks_threshold: number | null;
  readonly active_prefill_tokens_threshold: number | null;
  readonly active_prefill_tokens_threshold_frac: number | null;
}

/** One priority class: requests with priority >= `priority` (up to the next key) get every threshold times `scale` (priority-classes.ts). */
export interface PriorityScale {
  readonly priority: number;
  readonly scale: number;
}

/** Sorted by priority, no key twice; empty: every request at scale 1. */
export type PriorityScales = readonly PriorityScale[];

/** Where one attempt of a request goes: a worker's sidecar and the dp rank to ask for. */
export interface RouteTarget {
  /** worker_id as a decimal string (Dynamo's ids are u64, beyond JSON's safe integers). */
  readonly workerId: string;
  /** host:port of the worker's sidecar (gRPC, h2c). */
  readonly address: string;
  /** Sent as the request's data_parallel_rank (what the engine obeys) and the `x-data-parallel-rank` header. */
  readonly dpRank: number;
}

/** Why every eligible worker was refused: the `details` of a 529 body. */
export interface OverloadDetails {
  /** Workers serving the model that could take traffic (known, reachable, not draining). */
  readonly workers: number;
  /** Of those, busy by the thresholds (all their ranks busy). */
  readonly busy: number;
  /** Of those, marked overloaded by their own sidecar (a RESOURCE_EXHAUSTED lease or the event's flag). */
  readonly worker_overloaded: number;
  /** Of those, with no credit left: this frontend sent them all the calls their last load event admitted (admit_now). */
  readonly no_credit: number;
  /** Already tried by this request and refused. */
  readonly tried: number;
  /** How many workers each check made busy (a worker can count under several). */
  readonly checks: Readonly<Partial<Record<BusyRule, number>>>;
}

export type RouteDecision =
  | { readonly kind: 'route'; readonly target: RouteTarget }
  /** Workers serve the model but none is free: the overload status (529). */
  /** `retryAfterMs`: the soonest a worker skipped for its refusal lease asked to be tried again (its pushback), if any did. */
  | { readonly kind: 'overloaded'; readonly details: OverloadDetails; readonly retryAfterMs?: number }
  /** The model is known but no worker of it can take traffic (unreachable, draining): 503. */
  | { readonly kind: 'unavailable'; readonly reason: string }
  /** Workers are known but none serves this model: 404. */
  | { readonly kind: 'unknown_model' }
  /** No worker is known at all: 503. */
  | { readonly kind: 'no_workers' };

/** One request in flight at a worker, as the router counts it for least-loaded and kv modes. */
export interface InFlight {
  /** Output tokens received so far for this attempt (a delta); counted with --router-track-output-blocks. */
  outputTokens(delta: number): void;
  /** Idempotent. */
  end(): void;
}

export interface Router {
  /** Models served by at least one known worker, sorted. */
  models(): string[];
  /**
   * One routing decision for one attempt; `tried` holds workerIds this request already tried.
   * `priority` (lower runs sooner) picks the request's class, whose scale multiplies every busy
   * threshold (priority-classes.ts); undefined: scale 1. With `tenant` it also picks which
   * overload leases apply (worker-pool.ts): a worker refusing only less urgent requests, or
   * other tenants', is still tried.
   */
  route(model: string, tried: ReadonlySet<string>, promptTokens: number, priority?: number, tenant?: string, ttftSloMs?: number): RouteDecision;
  /** The frontend's TTFT SLO (--ttft-slo-ms); null or absent: none. */
  readonly ttftSloMs?: number | null;
  /** Counts an attempt at `target` until end() (the caller ends it however the attempt ends). */
  begin(target: RouteTarget, promptTokens: number): InFlight;
  /**
   * The worker refused before any output: `overloaded` (RESOURCE_EXHAUSTED) marks it
   * overloaded for the lease, cleared early by its next load event (its `pushbackMs`, when
   * given, is what a client answered 529 meanwhile is told to wait); `unreachable`
   * (UNAVAILABLE) keeps it out of routing for the same lease.
   */
  workerRefused(
    target: RouteTarget,
    kind: 'overloaded' | 'unreachable',
    pushbackMs?: number,
    refused?: { readonly priority: number; readonly tenant?: string | undefined },
  ): void;
  /** At least one worker is known and reachable. */
  ready(): boolean;
  /** For /busy_threshold diagnostics: checks of `thresholds` that cannot fire on some worker of the model. */
  inactiveChecks(model: string, thresholds: Thresholds): InactiveCheck[];
}

/** A check that is configured for a model but cannot fire on some of its workers. */
export interface InactiveCheck {
  readonly check: BusyCheck;
  /** e.g. "kv_total_blocks unknown" */
  readonly reason: string;
  readonly workers: readonly string[];
}

export interface ThresholdApi {
  /** Thresholds of one model (flag defaults merged with API changes). */
  get(model: string): Thresholds;
  /** Sets every non-null field given; null and absent fields are left as they are. */
  update(model: string, changes: Partial<Thresholds>): Thresholds;
  /** Turns one check off for this model (beyond Dynamo: DELETE /busy_threshold). */
  disable(model: string, check: BusyCheck): Thresholds;
  /** The model's priority classes (--priority-threshold-scale until the API sets the model's own). */
  priorityScales(model: string): PriorityScales;
  /** Replaces the model's priority classes (an empty list: every priority at scale 1). */
  setPriorityScales(model: string, scales: PriorityScales): PriorityScales;
}
