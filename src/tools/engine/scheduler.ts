/**
 * Continuous-batching scheduler of the simulated engine, modelled on vLLM's V1 scheduler and
 * free of I/O: time only enters through the injected {@link Timers}, so tests drive it with a
 * fake clock.
 *
 * One step at a time. Planning a step (at once when work arrives while idle, else when the
 * previous step ends):
 *   1. every running sequence whose prompt is prefilled decodes one token (1 budget token each);
 *   2. running sequences still prefilling take chunks of the remaining budget, oldest first;
 *   3. waiting sequences are admitted FIFO while budget is left, fewer than max_num_seqs run
 *      and the head's KV fits; the head never gets overtaken (like vLLM's waiting queue).
 * The step lasts what the injected {@link StepCost} says for its work (how many sequences
 * decode, the context they read, the prompt tokens prefilled): by default the fixed model,
 * (decode_step_ms if anything decodes) + prefill tokens / prefill rate; the engine passes the
 * one its options choose (step-cost.ts). Then its tokens are committed: decoders get their
 * token, a sequence whose prefill completes samples its first token, and the loop plans again.
 * No work, no timer.
 *
 * KV rule (invariant after every public call): a running sequence holds exactly
 * ceil((prompt + generated) / block_size) blocks; waiting ones hold none. The prompt's blocks
 * are taken at admission and one more when a token crosses a block boundary. When that growth
 * finds no free block, the newest running sequence is preempted (vLLM's recompute
 * preemption): its blocks are freed and it goes back to the head of the waiting queue to
 * prefill prompt + generated again; tokens already streamed stay streamed.
 */
import type { EngineOptions } from './options.js';
import { KvBlockAllocator } from './kv-cache.js';
import { fixedStepCost, type StepCost } from './step-cost.js';
import { hashTokens, mix32, mulberry32, type Random } from '../../platform/prng.js';

export interface Timers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  set: (callback, ms) => setTimeout(callback, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The engine options the scheduler uses (documented on EngineOptions). */
export type SchedulerConfig = Pick<
  EngineOptions,
  'numGpuBlocks' | 'blockSize' | 'maxNumSeqs' | 'maxNumBatchedTokens' | 'prefillTokensPerS' | 'decodeStepMs' | 'earlyStopProb' | 'seed' | 'vocabSize'
>;

export type FinishReason = 'stop' | 'length';

/** Receives each new token as it is committed; `finish` is set on the sequence's last token. */
export type TokenListener = (tokenIds: readonly number[], finish: FinishReason | undefined) => void;

export interface SequenceRequest {
  readonly promptIds: readonly number[];
  /** Already validated by the caller: >= 1 and prompt + maxTokens within the KV cache. */
  readonly maxTokens: number;
}

export interface SequenceHandle {
  readonly generated: number;
  /** Removes the sequence wherever it is and frees its blocks at once; no callback follows. */
  cancel(): void;
}

export interface SchedulerStats {
  running: number;
  waiting: number;
  usedBlocks: number;
  totalBlocks: number;
  generatedTokens: number;
  prefilledTokens: number;
  preemptions: number;
}

type SeqState = 'waiting' | 'running' | 'finished';

class Sequence implements SequenceHandle {
  state: SeqState = 'waiting';
  generated = 0;
  blocks = 0;
  prefillRemaining = 0;

  constructor(
    readonly prompt: number,
    readonly maxTokens: number,
    readonly rng: Random,
    readonly listener: TokenListener,
    private readonly remove: (seq: Sequence) => void,
  ) {}

  cancel(): void {
    this.remove(this);
  }
}

interface StepPlan {
  readonly decoders: readonly Sequence[];
  readonly chunks: ReadonlyMap<Sequence, number>;
}

export class Scheduler {
  private readonly kv: KvBlockAllocator;
  private readonly waiting: Sequence[] = [];
  private readonly running: Sequence[] = [];
  private timer: unknown;
  private plan: StepPlan | undefined;
  private closed = false;
  // Listeners run inside a commit; a cancel from one must not plan a step half-way through it.
  private committing = false;
  private generatedTokens = 0;
  private prefilledTokens = 0;
  private preemptions = 0;
  private readonly removeSeq = (seq: Sequence): void => this.cancelSequence(seq);

  constructor(
    private readonly config: SchedulerConfig,
    private readonly timers: Timers = realTimers,
    private readonly stepCost: StepCost = fixedStepCost(config),
  ) {
    this.kv = new KvBlockAllocator(config.numGpuBlocks, config.blockSize);
  }

  submit(request: SequenceRequest, listener: TokenListener): SequenceHandle {
    if (this.closed) throw new Error('scheduler is closed');
    // Seeded by engine seed and prompt, not by arrival order: same prompt, same output.
    const rng = mulberry32(mix32(this.config.seed, hashTokens(request.promptIds)));
    const seq = new Sequence(request.promptIds.length, request.maxTokens, rng, listener, this.removeSeq);
    this.waiting.push(seq);
    this.kick();
    return seq;
  }

  stats(): SchedulerStats {
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      usedBlocks: this.kv.usedBlocks,
      totalBlocks: this.kv.totalBlocks,
      generatedTokens: this.generatedTokens,
      prefilledTokens: this.prefilledTokens,
      preemptions: this.preemptions,
    };
  }

  /** Drops every sequence without callbacks and stops the step timer. */
  close(): void {
    this.closed = true;
    for (const seq of [...this.running, ...this.waiting]) this.cancelSequence(seq);
    this.stopTimer();
  }

  private kick(): void {
    if (this.timer === undefined && !this.closed && !this.committing) this.planStep();
  }

  private stopTimer(): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
    this.plan = undefined;
  }

  private planStep(): void {
    let budget = this.config.maxNumBatchedTokens;
    const decoders: Sequence[] = [];
    const chunks = new Map<Sequence, number>();
    for (const seq of this.running) {
      if (seq.prefillRemaining === 0 && budget > 0) {
        decoders.push(seq);
        budget -= 1;
      }
    }
    for (const seq of this.running) {
      if (seq.prefillRemaining > 0 && budget > 0) {
        const take = Math.min(budget, seq.prefillRemaining);
        chunks.set(seq, take);
        budget -= take;
      }
    }
    while (budget > 0 && this.waiting.length > 0 && this.running.length < this.config.maxNumSeqs) {
      const head = this.waiting[0]!;
      const context = head.prompt + head.generated;
      const need = this.kv.blocksFor(context);
      if (!this.kv.tryAllocate(need)) break;
      this.waiting.shift();
      head.state = 'running';
      head.blocks = need;
      head.prefillRemaining = context;
      this.running.push(head);
      const take = Math.min(budget, context);
      chunks.set(head, take);
      budget -= take;
    }
    let prefillTokens = 0;
    for (const n of chunks.values()) prefillTokens += n;
    if (decoders.length === 0 && prefillTokens === 0) return;
    // Each decoder reads the KV of its whole context so far: prompt + tokens generated.
    let decodeContextTokens = 0;
    for (const seq of decoders) decodeContextTokens += seq.prompt + seq.generated;
    const ms = this.stepCost({ decodeSequences: decoders.length, decodeContextTokens, prefillTokens });
    this.plan = { decoders, chunks };
    this.timer = this.timers.set(() => this.commitStep(), ms);
  }

  private commitStep(): void {
    const plan = this.plan;
    this.timer = undefined;
    this.plan = undefined;
    if (plan === undefined || this.closed) return;
    this.committing = true;
    try {
      // A sequence cancelled or preempted since planning has state !== 'running' and is skipped.
      for (const seq of plan.decoders) {
        if (seq.state === 'running') this.emitToken(seq);
      }
      for (const [seq, n] of plan.chunks) {
        if (seq.state !== 'running') continue;
        seq.prefillRemaining -= n;
        this.prefilledTokens += n;
        if (seq.prefillRemaining === 0) this.emitToken(seq);
      }
    } finally {
      this.committing = false;
    }
    this.kick();
  }

  private emitToken(seq: Sequence): void {
    const token = Math.floor(seq.rng() * (this.config.vocabSize - 1)) + 1;
    seq.generated += 1;
    this.generatedTokens += 1;
    let finish: FinishReason | undefined;
    if (seq.generated >= seq.maxTokens) finish = 'length';
    else if (this.config.earlyStopProb > 0 && seq.rng() < this.config.earlyStopProb) finish = 'stop';
    if (finish) {
      this.release(seq);
    } else {
      this.grow(seq);
    }
    seq.listener([token], finish);
  }

  /** Restores the KV invariant for `seq` after a token, preempting the newest sequences if needed. */
  private grow(seq: Sequence): void {
    const need = this.kv.blocksFor(seq.prompt + seq.generated);
    while (seq.state === 'running' && seq.blocks < need) {
      if (this.kv.tryAllocate(1)) {
        seq.blocks += 1;
      } else {
        this.preempt(this.running[this.running.length - 1]!);
      }
    }
  }

  private preempt(victim: Sequence): void {
    this.release(victim);
    victim.state = 'waiting';
    victim.prefillRemaining = 0;
    this.waiting.unshift(victim);
    this.preemptions += 1;
  }

  /** Frees the blocks of a running sequence and takes it out of the running set. */
  private release(seq: Sequence): void {
    this.kv.free(seq.blocks);
    seq.blocks = 0;
    seq.state = 'finished';
    const i = this.running.indexOf(seq);
    if (i >= 0) this.running.splice(i, 1);
  }

  private cancelSequence(seq: Sequence): void {
    if (seq.state === 'running') {
      this.release(seq);
    } else if (seq.state === 'waiting') {
      seq.state = 'finished';
      const i = this.waiting.indexOf(seq);
      if (i >= 0) this.waiting.splice(i, 1);
    }
    if (this.running.length === 0 && this.waiting.length === 0) {
      this.stopTimer();
    } else if (this.running.length === 0) {
      // The planned step may hold only cancelled work; replan so the waiting head is admitted now.
      this.stopTimer();
      this.kick();
    }
  }
}
