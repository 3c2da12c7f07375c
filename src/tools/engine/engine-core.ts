/**
 * The simulated engine without its transport: one {@link Scheduler} per dp rank (vLLM runs one
 * engine core, with its own KV cache, per rank), the Generate calls in flight by request id (for
 * Abort), rank picking, and the per-rank load GetLoads reports. {@link EngineServer} adapts
 * grpc-js calls to it; unit tests drive it with fake timers and a recording sink.
 *
 * Every way a call ends (finish, abort, client cancel, deadline, shutdown) goes through one
 * `finish` that cancels its sequence exactly once, which frees its KV blocks at once.
 */
import { GrpcStatus } from '../../protocol/grpc/status.js';
import type { GenerateRequestMessage, GenerateResponseMessage, SchedulerLoadMessage } from '../../protocol/engine/engine-proto.js';
import type { EngineOptions } from './options.js';
import { InvalidRequestError, parseGenerateRequest } from './request.js';
import { realTimers, Scheduler, type CancelReason, type FinishReason, type SchedulerStats, type SequenceHandle, type Timers } from './scheduler.js';
import { engineStepCost } from './step-cost.js';

/** Where a call's messages and its end go: the grpc-js stream in the server, a recorder in tests. */
export interface GenerateSink {
  write(message: GenerateResponseMessage): void;
  /** Ends the call with status OK, after its last message. */
  end(): void;
  /** Ends the call with a status other than OK. */
  fail(code: GrpcStatus, details: string): void;
}

/** What the transport knows of a call besides its request message. */
export interface GenerateCallContext {
  /** The call's `x-data-parallel-rank` metadata, if any. */
  readonly metadataRank?: string | undefined;
  /** Time left until the call's deadline; unset or infinite means none. */
  readonly timeoutMs?: number | undefined;
}

/** A Generate call in flight, as its transport drives it. Every method is a no-op once the call ended. */
export interface GenerateCall {
  readonly rank: number;
  /**
   * The client went away (or the transport saw the deadline pass: `reason` 'deadline'): drops the
   * sequence and sends nothing more.
   */
  cancel(reason?: 'cancelled' | 'deadline'): void;
}

/** vLLM's finish reasons as they go on the wire; "abort" only comes from Abort. */
type WireFinishReason = FinishReason | 'abort';

const INT32_MAX = 0x7fff_ffff;
const UINT32_MAX = 0xffff_ffff;

class ActiveCall implements GenerateCall {
  private handle: SequenceHandle | undefined;
  private readonly outputIds: number[] = [];
  /** The ids of the last chunk sent (streamed calls): vLLM's final complete repeats them. */
  private lastDelta: readonly number[] = [];
  private ended = false;
  private endReason: CancelReason = 'cancelled';
  private deadlineTimer: unknown;

  constructor(
    readonly rank: number,
    readonly requestId: string,
    private readonly promptTokens: number,
    private readonly stream: boolean,
    private readonly sink: GenerateSink,
    private readonly timers: Timers,
    private readonly onEnd: (call: ActiveCall) => void,
  ) {}

  attach(handle: SequenceHandle): void {
    this.handle = handle;
    if (this.ended) handle.cancel(this.endReason);
  }

  armDeadline(timeoutMs: number | undefined): void {
    if (timeoutMs === undefined || !Number.isFinite(timeoutMs)) return;
    // grpc-js answers DEADLINE_EXCEEDED by itself; this timer makes sure the blocks are freed too.
    this.deadlineTimer = this.timers.set(() => this.fail(GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded'), Math.max(0, timeoutMs));
  }

  /**
   * Streamed calls get what vLLM's servicer sends with RequestOutputKind.DELTA: each chunk its new
   * ids with completion_tokens = their count, and the final complete the last chunk's ids again.
   */
  onTokens(tokenIds: readonly number[], finish: FinishReason | undefined): void {
    if (this.ended) return;
    this.outputIds.push(...tokenIds);
    if (this.stream) this.chunk(tokenIds);
    // The sequence has completed (released by the scheduler): its cancel counts nothing.
    if (finish) this.complete(finish, 'shutdown');
  }

  /**
   * vLLM's abort: one last output with no new ids and finish_reason "abort" (streamed: an empty
   * chunk, then a complete repeating it; not streamed: a complete with the ids so far), then OK.
   */
  abort(): void {
    if (this.ended) return;
    if (this.stream) this.chunk([]);
    this.complete('abort', 'cancelled');
  }

  cancel(reason: 'cancelled' | 'deadline' = 'cancelled'): void {
    this.finish(reason);
  }

  /** A call failed by its deadline wastes as 'deadline'; any other failure is shutdown, not waste. */
  fail(code: GrpcStatus, details: string): void {
    if (this.finish(code === GrpcStatus.DEADLINE_EXCEEDED ? 'deadline' : 'shutdown')) this.sink.fail(code, details);
  }

  private chunk(tokenIds: readonly number[]): void {
    this.lastDelta = [...tokenIds];
    this.sink.write({ chunk: { token_ids: [...tokenIds], prompt_tokens: this.promptTokens, completion_tokens: tokenIds.length, cached_tokens: 0 } });
  }

  private complete(reason: WireFinishReason, cancelReason: CancelReason): void {
    if (!this.finish(cancelReason)) return;
    const ids = this.stream ? this.lastDelta : this.outputIds;
    this.sink.write({
      complete: { output_ids: [...ids], finish_reason: reason, prompt_tokens: this.promptTokens, completion_tokens: ids.length, cached_tokens: 0 },
    });
    this.sink.end();
  }

  /** Drops the sequence (freeing its blocks) and the call's registration; false if it had ended already. */
  private finish(reason: CancelReason): boolean {
    if (this.ended) return false;
    this.ended = true;
    this.endReason = reason;
    if (this.deadlineTimer !== undefined) this.timers.clear(this.deadlineTimer);
    this.handle?.cancel(reason);
    this.onEnd(this);
    return true;
  }
}

export class EngineCore {
  /** One scheduler per dp rank, index = rank. */
  readonly ranks: readonly Scheduler[];
  private readonly byId = new Map<string, Set<ActiveCall>>();
  private active = 0;

  constructor(
    private readonly options: EngineOptions,
    private readonly timers: Timers = realTimers,
  ) {
    const stepCost = engineStepCost(options);
    this.ranks = Array.from({ length: options.dataParallelSize }, () => new Scheduler(options, timers, stepCost));
  }

  /** Generate calls accepted and not ended. */
  get activeCalls(): number {
    return this.active;
  }

  /**
   * Starts a call on the rank it asks for (data_parallel_rank, else `x-data-parallel-rank`), else
   * on the least loaded one. Throws {@link InvalidRequestError} (nothing written to the sink) for a
   * request the engine refuses.
   */
  generate(request: GenerateRequestMessage, context: GenerateCallContext, sink: GenerateSink): GenerateCall {
    const parsed = parseGenerateRequest(request, this.options, context.metadataRank);
    const rank = parsed.rank ?? this.leastLoadedRank();
    const call = new ActiveCall(rank, parsed.requestId, parsed.promptIds.length, parsed.stream, sink, this.timers, (ended) => this.unregister(ended));
    let calls = this.byId.get(call.requestId);
    if (calls === undefined) this.byId.set(call.requestId, (calls = new Set()));
    calls.add(call);
    this.active += 1;
    call.armDeadline(context.timeoutMs);
    call.attach(this.ranks[rank]!.submit({ promptIds: parsed.promptIds, maxTokens: parsed.maxTokens }, (ids, finish) => call.onTokens(ids, finish)));
    return call;
  }

  /**
   * vLLM's Abort: every call in flight (running or waiting) with one of these request ids ends
   * with a complete whose finish_reason is "abort" and status OK; its blocks are freed at once.
   * Unknown ids are ignored. Returns how many calls ended.
   */
  abort(requestIds: Iterable<string>): number {
    let ended = 0;
    for (const id of new Set(requestIds)) {
      for (const call of [...(this.byId.get(id) ?? [])]) {
        call.abort();
        ended += 1;
      }
    }
    return ended;
  }

  /** Ends every call in flight with this status (shutdown). */
  failAll(code: GrpcStatus, details: string): void {
    for (const calls of [...this.byId.values()]) for (const call of [...calls]) call.fail(code, details);
  }

  /** The rank with the fewest running + waiting sequences, lowest on ties. */
  leastLoadedRank(): number {
    let best = 0;
    let bestLoad = Number.POSITIVE_INFINITY;
    this.ranks.forEach((scheduler, rank) => {
      const { running, waiting } = scheduler.stats();
      if (running + waiting < bestLoad) {
        best = rank;
        bestLoad = running + waiting;
      }
    });
    return best;
  }

  /** GetLoads' SchedulerLoad of every rank, or of `dpRank` alone; throws {@link InvalidRequestError} for a rank out of range. */
  loads(dpRank?: number | null): SchedulerLoadMessage[] {
    const size = this.ranks.length;
    if (dpRank === undefined || dpRank === null) return this.ranks.map((_, rank) => this.loadOf(rank));
    if (!Number.isInteger(dpRank) || dpRank < 0 || dpRank >= size) {
      throw new InvalidRequestError(`dp_rank ${dpRank} is out of range [0, ${size}) (data parallel size ${size})`);
    }
    return [this.loadOf(dpRank)];
  }

  rankStats(): SchedulerStats[] {
    return this.ranks.map((scheduler) => scheduler.stats());
  }

  /** Every rank's stats summed. */
  stats(): SchedulerStats {
    const sum: SchedulerStats = {
      running: 0,
      waiting: 0,
      usedBlocks: 0,
      totalBlocks: 0,
      generatedTokens: 0,
      prefilledTokens: 0,
      preemptions: 0,
      wastedCancelledTokens: 0,
      wastedDeadlineTokens: 0,
      wastedPreemptedTokens: 0,
    };
    for (const s of this.rankStats()) for (const key of Object.keys(sum) as (keyof SchedulerStats)[]) sum[key] += s[key];
    return sum;
  }

  /** Same numbers as {@link stats}, saturated to the uint32 fields of GetServerInfo. */
  serverInfoCounts(): { num_running: number; num_waiting: number; kv_used_blocks: number; kv_total_blocks: number } {
    const s = this.stats();
    return {
      num_running: Math.min(s.running, UINT32_MAX),
      num_waiting: Math.min(s.waiting, UINT32_MAX),
      kv_used_blocks: Math.min(s.usedBlocks, UINT32_MAX),
      kv_total_blocks: Math.min(s.totalBlocks, UINT32_MAX),
    };
  }

  /** Drops every sequence without callbacks and stops the step timers. */
  close(): void {
    for (const scheduler of this.ranks) scheduler.close();
  }

  private unregister(call: ActiveCall): void {
    const calls = this.byId.get(call.requestId);
    if (!calls?.delete(call)) return;
    if (calls.size === 0) this.byId.delete(call.requestId);
    this.active -= 1;
  }

  private loadOf(rank: number): SchedulerLoadMessage {
    const s = this.ranks[rank]!.stats();
    const block = this.options.blockSize;
    // int32 on the wire: saturate rather than wrap for huge (configurable) caches.
    const int32 = (n: number): number => Math.min(n, INT32_MAX);
    return {
      dp_rank: rank,
      num_running_reqs: int32(s.running),
      num_waiting_reqs: int32(s.waiting),
      num_total_reqs: int32(s.running + s.waiting),
      num_used_tokens: int32(s.usedBlocks * block),
      max_total_num_tokens: int32(s.totalBlocks * block),
      token_usage: s.totalBlocks === 0 ? 0 : s.usedBlocks / s.totalBlocks,
      gen_throughput: 0,
      cache_hit_rate: 0,
      utilization: 0,
      max_running_requests: int32(this.options.maxNumSeqs),
    };
  }
}
