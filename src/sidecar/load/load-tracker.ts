/**
 * The worker's current load, per data-parallel rank, in the shape of a Dynamo load event.
 *
 *   const t = new LoadTracker({ workerId, dataParallelSize: 2, kvBlockSize: 16, trackOutputBlocks: true });
 *   const call = t.callStarted(rank, promptTokens, maxTokens);  // when dispatched to the engine
 *   call.output(n) / call.output(total, { cumulative: true });   call.end();
 *   t.applyScrape(scraper.ranks, scraper.stale);  t.setAdmission({...});  t.markRejected();
 *   t.setModel(name);  t.setGrpcAddress('10.0.0.5:50050');  t.setDraining(true);
 *   t.snapshot() -> LoadEvent[] (one per rank, advances `sequence`);  t.peek();  t.onChange(fn)
 *
 * Where each field comes from (precedence):
 * - kv_used_blocks: the engine scrape for that rank while it is fresh; null otherwise (a stale
 *   number is worse than none: consumers then fall back to active_decode_blocks).
 * - kv_total_blocks: the last scraped total for that rank (capacity does not change while
 *   stale), else the static --kv-total-blocks, else what the engine told (learn()), else null.
 * - block size for the decode-block arithmetic: last scraped block size, else what the engine
 *   told, else --kv-block-size (default DEFAULT_KV_BLOCK_SIZE). The caller passes learn() only
 *   what no flag set (LoadReporting), so a flag wins over the engine's word.
 * - the number of ranks: --data-parallel-size, or what the engine told (learn() grows or
 *   shrinks them; calls still running on a dropped rank are no longer counted).
 * - active_prefill_tokens: sum of prompt tokens of calls in the engine that have not streamed
 *   any output yet. active_decode_blocks: sum over calls in the engine of
 *   ceil((prompt + output so far) / block size), output only with trackOutputBlocks.
 *   Both are traffic accounting only; the scrape never overrides them.
 * - max_num_batched_tokens: static config, else what the engine told, else null.
 * - engine_request, request_queue, engine_request_limit, request_queue_limit, draining: whatever
 *   the proxy last told us; they describe the whole worker and are repeated in every rank's
 *   event, as is admit_now (admit-now.ts), which follows from them and the rejection below.
 * - model, grpc_address, heartbeat_ms: who the worker is and how often it reports, the same in
 *   every rank's event. model is null until known (--served-model-name, or the engine's answer
 *   to GetModelInfo); grpc_address is set once the ingress is bound (setGrpcAddress).
 *
 * overloaded (worker-wide) is true exactly when
 *   (a) admission is on and the gate is full: engine_request >= limit and request_queue >= queue
 *       limit, i.e. the next call would be rejected; or
 *   (b) markRejected() was called, no setAdmission() since has reported room, and less than
 *       `overloadHoldMs` (default 1000) has passed since that rejection. Room is a queue place
 *       after a full-gate rejection (reason queue_full), but a call admitted at once (`hasRoom`)
 *       after one refused with queue places left (expected_wait, queue_timeout): a queue place
 *       would only be refused again, and a frontend that believed it would keep paying a round
 *       trip per request to hear so instead of answering 529 at once.
 * Room reported by setAdmission clears (b) at once, and (b) also expires by itself, so a worker
 * that goes idle cannot stay "busy" (Dynamo's stale-busy bug) even if nothing else changes:
 * the next heartbeat snapshot reads false.
 *
 * While overloaded, overloaded_priority and overloaded_tenants say for whom: calls of that
 * priority or less urgent, of those tenants (null: every priority, every tenant). For (a) it is
 * what the full queue refuses (an urgent call would displace a queued one: waiting-room.ts); for
 * (b) the most urgent priority and the tenants refused since the overload began. A frontend can
 * then still send an urgent call, or a call of a tenant holding few places, to a worker that is
 * refusing batch calls or a noisy tenant's.
 */
import { DEFAULT_DATA_PARALLEL_SIZE, DEFAULT_KV_BLOCK_SIZE, DEFAULT_LOAD_HEARTBEAT_MS } from '../config/sidecar-config.js';
import type { ScrapedLoad } from './engine-metrics-reader.js';
import type { LoadEvent, WorkLoadFields } from '../../protocol/load-event.js';
import { MAX_LISTED_TENANTS } from '../admission/waiting-room.js';
import { admitNow } from './admit-now.js';

export interface LoadTrackerConfig {
  workerId: number;
  dataParallelSize?: number;
  kvTotalBlocks?: number | undefined;
  kvBlockSize?: number;
  maxNumBatchedTokens?: number | undefined;
  trackOutputBlocks?: boolean;
  overloadHoldMs?: number;
  /** Reported as heartbeat_ms; default DEFAULT_LOAD_HEARTBEAT_MS. */
  heartbeatMs?: number;
  /** Initial model (--served-model-name); default null until setModel(). */
  model?: string | undefined;
  /** Initial grpc_address; default '' until setGrpcAddress(). */
  grpcAddress?: string;
  now?: () => number;
  /** predicted_ttft_ms, read when an event is taken (undefined: not known yet). */
  predictTtftMs?: (() => number | undefined) | undefined;
  /** While the gate is full, whom it refuses (AdmissionGate.refusedWhenFull); unset: everyone. */
  refusedWhenFull?: (() => OverloadScope | undefined) | undefined;
}

/** Whom an overload refuses: calls of `priority` or less urgent (-Infinity: all), of `tenants` (null: all). */
export interface OverloadScope {
  readonly priority: number;
  readonly tenants: readonly string[] | null;
}

const EVERYONE: OverloadScope = Object.freeze({ priority: -Infinity, tenants: null });

/** What the engine told about itself (EngineDiscovery), where no flag says otherwise; undefined: not told. */
export interface LearnedLoadFacts {
  kvTotalBlocks: number | undefined;
  kvBlockSize: number | undefined;
  maxNumBatchedTokens: number | undefined;
  dataParallelSize: number | undefined;
}

export interface AdmissionState {
  engineRequest: number;
  requestQueue: number;
  /** Undefined when admission is off. */
  limit?: number | undefined;
  queueLimit?: number | undefined;
  /** A call arriving now would be admitted at once (AdmissionGate.hasRoom); absent = judged by the counts alone. */
  hasRoom?: boolean | undefined;
  /** Of the free queue places, those a call would be let into for its expected wait (admit_now counts only these); absent: all. */
  queuePlaces?: number | undefined;
}

/** No call in the engine or queued, admission off: where a tracker (and its reporter's reused state) start. */
export function emptyAdmissionState(): AdmissionState {
  return { engineRequest: 0, requestQueue: 0, limit: undefined, queueLimit: undefined, hasRoom: undefined, queuePlaces: undefined };
}

export interface CallLoad {
  /** Output tokens seen: a delta by default, or the running total with { cumulative: true }. */
  output(tokens: number, options?: { cumulative?: boolean }): void;
  /** Idempotent. */
  end(): void;
}

/** Parses the dp-rank header; anything but an integer in [0, size) gives rank 0 and valid=false. */
export function parseDpRankHeader(value: string | string[] | undefined, dataParallelSize: number): { rank: number; valid: boolean } {
  if (value === undefined) return { rank: 0, valid: true };
  const raw = Array.isArray(value) ? value[0] : value;
  const trimmed = (raw ?? '').trim();
  if (!/^\d{1,9}$/.test(trimmed)) return { rank: 0, valid: false };
  const rank = Number(trimmed);
  return rank < dataParallelSize ? { rank, valid: true } : { rank: 0, valid: false };
}

interface Call {
  prompt: number;
  output: number;
  prefill: boolean;
}

interface Rank {
  calls: Set<Call>;
  prefillTokens: number;
  scraped: ScrapedLoad | undefined;
  scrapeFresh: boolean;
  sequence: number;
}

export class LoadTracker {
  private workFields: ((rank: number) => WorkLoadFields) | undefined;
  private readonly config: LoadTrackerConfig;
  private learnedFacts: Readonly<LearnedLoadFacts> = {
    kvTotalBlocks: undefined,
    kvBlockSize: undefined,
    maxNumBatchedTokens: undefined,
    dataParallelSize: undefined,
  };
  private workerIdValue: number;
  private readonly now: () => number;
  private readonly ranks: Rank[];
  private readonly listeners = new Set<() => void>();
  // Updated in place: the gate reports every acquire and release, so this path allocates nothing.
  private readonly admission: AdmissionState = emptyAdmissionState();
  private draining = false;
  private rejectedAt: number | undefined;
  /** The last rejection left queue places: only a call admitted at once clears it (see (b) above). */
  private rejectedUntilAdmittable = false;
  /** Whom the rejections of the overload in progress refused ((b) above). */
  private refused: { priority: number; tenants: Set<string> | null } = { priority: -Infinity, tenants: null };
  private model: string | null;
  private grpcAddress: string;

  constructor(config: LoadTrackerConfig) {
    const size = config.dataParallelSize ?? DEFAULT_DATA_PARALLEL_SIZE;
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`dataParallelSize must be a positive integer, got ${size}`);
    this.config = config;
    this.workerIdValue = config.workerId;
    this.now = config.now ?? Date.now;
    this.model = config.model ?? null;
    this.grpcAddress = config.grpcAddress ?? '';
    this.ranks = Array.from({ length: size }, newRank);
  }

  get dataParallelSize(): number {
    return this.ranks.length;
  }

  /** kv_total_blocks when no scrape gives one: the flag, else what the engine told. */
  get kvTotalBlocks(): number | undefined {
    return this.config.kvTotalBlocks ?? this.learnedFacts.kvTotalBlocks;
  }

  /** What the engine told about itself; undefined fields are not known (or a flag set them). */
  learn(facts: LearnedLoadFacts): void {
    const before = this.learnedFacts;
    if (
      before.kvTotalBlocks === facts.kvTotalBlocks &&
      before.kvBlockSize === facts.kvBlockSize &&
      before.maxNumBatchedTokens === facts.maxNumBatchedTokens &&
      before.dataParallelSize === facts.dataParallelSize
    )
      return;
    this.learnedFacts = Object.freeze({ ...facts });
    const size = facts.dataParallelSize ?? this.config.dataParallelSize ?? DEFAULT_DATA_PARALLEL_SIZE;
    if (Number.isInteger(size) && size >= 1) {
      while (this.ranks.length < size) this.ranks.push(newRank());
      this.ranks.length = size;
    }
    this.changed();
  }

  /** Listener runs synchronously on every change; keep it cheap (e.g. schedule a debounce). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Call when a call is dispatched to the engine (not while it waits in the sidecar queue).
   * maxTokens is accepted for a future reservation-style estimate; the accounting ignores it.
   */
  callStarted(rank: number, promptTokens: number, _maxTokens?: number): CallLoad {
    const r = this.ranks[Number.isInteger(rank) && rank >= 0 && rank < this.dataParallelSize ? rank : 0]!;
    const call: Call = { prompt: Math.max(0, Math.floor(promptTokens) || 0), output: 0, prefill: true };
    r.calls.add(call);
    r.prefillTokens += call.prompt;
    this.changed();
    let ended = false;
    return {
      output: (tokens, options) => {
        if (ended) return;
        const wasPrefill = call.prefill;
        const before = this.blocks(r, call);
        const n = Math.max(0, Math.floor(tokens) || 0);
        call.output = options?.cumulative ? Math.max(call.output, n) : call.output + n;
        if (wasPrefill) {
          call.prefill = false;
          r.prefillTokens -= call.prompt;
        }
        if (wasPrefill || this.blocks(r, call) !== before) this.changed();
      },
      end: () => {
        if (ended) return;
        ended = true;
        r.calls.delete(call);
        if (call.prefill) r.prefillTokens -= call.prompt;
        this.changed();
      },
    };
  }

  /** Latest scrape per rank; ranks outside [0, dataParallelSize) are ignored. */
  applyScrape(ranks: ReadonlyMap<number, ScrapedLoad>, stale: boolean): void {
    this.ranks.forEach((r, i) => {
      const s = ranks.get(i);
      if (s !== undefined) r.scraped = s;
      r.scrapeFresh = !stale && s !== undefined;
    });
    this.changed();
  }

  setAdmission(state: AdmissionState): void {
    const a = this.admission;
    const queuePlace =
      state.limit === undefined || state.engineRequest < state.limit || state.queueLimit === undefined || state.requestQueue < state.queueLimit;
    const admittable = state.hasRoom ?? queuePlace;
    if (this.rejectedUntilAdmittable ? admittable : queuePlace) this.rejectedAt = undefined;
    if (
      a.engineRequest === state.engineRequest &&
      a.requestQueue === state.requestQueue &&
      a.limit === state.limit &&
      a.queueLimit === state.queueLimit &&
      a.hasRoom === state.hasRoom &&
      a.queuePlaces === state.queuePlaces
    )
      return;
    a.engineRequest = state.engineRequest;
    a.requestQueue = state.requestQueue;
    a.limit = state.limit;
    a.queueLimit = state.queueLimit;
    a.hasRoom = state.hasRoom;
    a.queuePlaces = state.queuePlaces;
    this.changed();
  }

  /**
   * `untilAdmittable`: the call was refused with queue places left (expected wait too long, queue
   * timeout). `callClass`: its priority and tenant (unset: the overload is everyone's).
   */
  markRejected(options: { untilAdmittable?: boolean; callClass?: { readonly priority: number; readonly tenant: string } } = {}): void {
    const { callClass } = options;
    if (!this.rejectedRecently())
      this.refused = callClass ? { priority: callClass.priority, tenants: new Set([callClass.tenant]) } : { priority: -Infinity, tenants: null };
    else if (!callClass) this.refused = { priority: -Infinity, tenants: null };
    else {
      this.refused.priority = Math.min(this.refused.priority, callClass.priority);
      this.refused.tenants?.add(callClass.tenant);
      if (this.refused.tenants && this.refused.tenants.size > MAX_LISTED_TENANTS) this.refused.tenants = null;
    }
    this.rejectedAt = this.now();
    this.rejectedUntilAdmittable = options.untilAdmittable ?? false;
    this.changed();
  }

  setDraining(draining: boolean): void {
    if (this.draining === draining) return;
    this.draining = draining;
    this.changed();
  }

  setModel(model: string | null): void {
    if (this.model === model) return;
    this.model = model;
    this.changed();
  }

  /** The default worker id depends on the bound port, known only after listening. */
  setWorkerId(workerId: number): void {
    if (this.workerIdValue === workerId) return;
    this.workerIdValue = workerId;
    this.changed();
  }

  get workerId(): number {
    return this.workerIdValue;
  }

  setGrpcAddress(address: string): void {
    if (this.grpcAddress === address) return;
    this.grpcAddress = address;
    this.changed();
  }

  get overloaded(): boolean {
    return this.gateFull() || this.rejectedRecently();
  }

  /** Whom the overload refuses; undefined when not overloaded. */
  get overloadScope(): OverloadScope | undefined {
    const full = this.gateFull() ? (this.config.refusedWhenFull?.() ?? EVERYONE) : undefined;
    const recent = this.rejectedRecently() ? { priority: this.refused.priority, tenants: this.refused.tenants && [...this.refused.tenants] } : undefined;
    if (!full || !recent) return full ?? recent;
    return {
      priority: Math.min(full.priority, recent.priority),
      tenants: full.tenants && recent.tenants && [...new Set([...full.tenants, ...recent.tenants])],
    };
  }

  private gateFull(): boolean {
    const { engineRequest, requestQueue, limit, queueLimit } = this.admission;
    return limit !== undefined && queueLimit !== undefined && engineRequest >= limit && requestQueue >= queueLimit;
  }

  private rejectedRecently(): boolean {
    return this.rejectedAt !== undefined && this.now() - this.rejectedAt < (this.config.overloadHoldMs ?? 1000);
  }

  /** Current events without advancing `sequence` (for /load and metrics). */
  peek(): LoadEvent[] {
    return this.ranks.map((_, i) => this.event(i));
  }

  /** One event per rank, each with its rank's next sequence number: use for every publish. */
  snapshot(): LoadEvent[] {
    return this.ranks.map((r, i) => {
      r.sequence++;
      return this.event(i);
    });
  }

  private event(i: number): LoadEvent {
    const r = this.ranks[i]!;
    let decode = 0;
    for (const c of r.calls) decode += this.blocks(r, c);
    const { engineRequest, requestQueue, limit, queueLimit } = this.admission;
    const predictedTtft = this.config.predictTtftMs?.();
    const scope = this.overloadScope;
    return {
      worker_id: this.workerIdValue,
      dp_rank: i,
      active_decode_blocks: decode,
      active_prefill_tokens: r.prefillTokens,
      kv_used_blocks: r.scrapeFresh ? (r.scraped?.kvUsedBlocks ?? null) : null,
      kv_total_blocks: r.scraped?.kvTotalBlocks ?? this.kvTotalBlocks ?? null,
      max_num_batched_tokens: this.maxNumBatchedTokens ?? null,
      engine_request: engineRequest,
      request_queue: requestQueue,
      engine_request_limit: limit ?? null,
      overloaded: scope !== undefined,
      overloaded_priority: scope === undefined || scope.priority === -Infinity ? null : scope.priority,
      overloaded_tenants: scope?.tenants ? [...scope.tenants].sort() : null,
      draining: this.draining,
      timestamp_ms: this.now(),
      sequence: r.sequence,
      model: this.model,
      grpc_address: this.grpcAddress,
      heartbeat_ms: this.config.heartbeatMs ?? DEFAULT_LOAD_HEARTBEAT_MS,
      predicted_ttft_ms: predictedTtft === undefined ? null : Math.round(predictedTtft),
      ...this.workFields?.(i),
      admit_now: admitNow(this.admission, this.rejectedUntilAdmittable && this.rejectedRecently()),
      request_queue_limit: limit === undefined ? null : (queueLimit ?? null),
    };
  }

  /** The KV cache of `rank` as the SLO ledger reads it (kv-ledger.ts KvGeometry): its total, block size and fresh used blocks. */
  kvTotalBlocksOf(rank: number): number | undefined {
    return this.ranks[rank]?.scraped?.kvTotalBlocks ?? this.kvTotalBlocks;
  }
  /** With --ttft-slo-ms: the events' admission-by-work fields of a rank (call-work.ts). */
  setWorkFields(fields: (rank: number) => WorkLoadFields): void {
    this.workFields = fields;
  }

  get maxNumBatchedTokens(): number | undefined {
    return this.config.maxNumBatchedTokens ?? this.learnedFacts.maxNumBatchedTokens;
  }
  kvBlockSizeOf(rank: number): number {
    const r = this.ranks[rank];
    return r ? this.blockSize(r) : (this.learnedFacts.kvBlockSize ?? this.config.kvBlockSize ?? DEFAULT_KV_BLOCK_SIZE);
  }
  kvUsedBlocksOf(rank: number): number | undefined {
    const r = this.ranks[rank];
    return r?.scrapeFresh ? (r.scraped?.kvUsedBlocks ?? undefined) : undefined;
  }

  private blockSize(r: Rank): number {
    return r.scraped?.blockSize ?? this.learnedFacts.kvBlockSize ?? this.config.kvBlockSize ?? DEFAULT_KV_BLOCK_SIZE;
  }

  private blocks(r: Rank, c: Call): number {
    return Math.ceil((c.prompt + (this.config.trackOutputBlocks ? c.output : 0)) / this.blockSize(r));
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }
}

function newRank(): Rank {
  return { calls: new Set(), prefillTokens: 0, scraped: undefined, scrapeFresh: false, sequence: 0 };
}
