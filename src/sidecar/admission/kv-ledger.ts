/**
 * The ledger of what the calls through this sidecar ask of their engine, per dp rank: prefill
 * tokens admitted that have not had their first token, and KV blocks reserved for each call in
 * the engine, ceil((prompt + expected output) / block size). Queued calls are counted apart, as
 * projected load (Llumnix counts queued prompts' blocks as already used): what the decision
 * (slo-admission.ts) predicts with.
 *
 * The gate (gate.ts) drives it through AdmissionBudget, so each call moves through its states
 * exactly once whatever ends it (cancel, deadline, displacement, engine error, GOAWAY, drain):
 *   new -> queued -> prefill -> decode -> done,  with any state -> done.
 * Invariant, after every method: every count is >= 0 and equals the sum over the calls in its state.
 *
 * A call fits when its blocks fit beside the larger of the blocks reserved and the blocks the
 * engine reports used, and its prompt fits the prefill budget beside the prefill tokens already in
 * the engine without a first token (the engine's own queue stays short, so calls wait here, where
 * they can still be refused or sent elsewhere); or when its rank holds no call at all: a prompt
 * larger than the whole cache still goes (the engine decides), and nothing can wait for ever on
 * an empty engine.
 */
import { blocksFor } from '../../protocol/ttft-prediction.js';
import type { AdmissionBudget } from './gate.js';
import type { OutputLengths } from './output-lengths.js';
import type { PrefillLearner } from './prefill-model.js';

/** What the ledger needs to know of a rank's KV cache, read at each decision (the load tracker's view of the engine). */
export interface KvGeometry {
  /** Trusted total blocks of the rank; undefined when the engine did not tell (no KV budget then). */
  totalBlocks(rank: number): number | undefined;
  blockSize(rank: number): number;
  /** Blocks the engine itself reports used, when it reports them freshly. */
  usedBlocks(rank: number): number | undefined;
}

/** How many prefill tokens may be in the engine without a first token (slo-admission.ts prefillBudget). */
export type PrefillBudget = () => number;

type CostState = 'new' | 'queued' | 'prefill' | 'decode' | 'done';

/** One call's claim on its rank. Made by KvLedger.costOf; moved only by the ledger. */
export class CallCost {
  state: CostState = 'new';
  /** When it took its engine slot, and the prefill tokens ahead of it then (its first token's sample). */
  takenAt = 0;
  aheadAtTake = 0;

  constructor(
    readonly rank: number,
    readonly promptTokens: number,
    readonly blocks: number,
  ) {}
}

class RankLedger {
  prefillTokens = 0;
  reservedBlocks = 0;
  inEngine = 0;
  queuedTokens = 0;
  queuedBlocks = 0;
}

/** How much a prompt counts when it cannot be decoded (compressed, malformed, another wire): a long one, on the safe side. */
export const UNDECODED_PROMPT_TOKENS = 4096;
/** Hold times (slot to release) remembered for the KV wait: an exponentially weighted mean of this weight. */
const HOLD_WEIGHT = 0.1;

export class KvLedger implements AdmissionBudget<CallCost> {
  private readonly ranks: RankLedger[] = [];
  private meanHoldValue: number | undefined;

  constructor(
    private readonly geometry: KvGeometry,
    private readonly prefill: PrefillLearner,
    private readonly outputs: OutputLengths,
    private readonly now: () => number,
    private readonly prefillBudget: PrefillBudget = () => Infinity,
  ) {}

  /** The cost of a call on `rank` with this prompt (undefined: it could not be decoded) and max_tokens. */
  costOf(rank: number, promptTokens: number | undefined, maxTokens: number | undefined): CallCost {
    const prompt = promptTokens ?? UNDECODED_PROMPT_TOKENS;
    return new CallCost(rank, prompt, blocksFor(prompt + this.outputs.expected(maxTokens), this.geometry.blockSize(rank)));
  }

  private rank(i: number): RankLedger {
    let r = this.ranks[i];
    if (!r) for (let k = this.ranks.length; k <= i; k++) r = this.ranks[k] = new RankLedger();
    return r!;
  }

  /** Blocks counted used on `rank`: the larger of ours and the engine's own figure. */
  usedBlocks(rank: number): number {
    return Math.max(this.rank(rank).reservedBlocks, this.geometry.usedBlocks(rank) ?? 0);
  }

  /** Blocks free on `rank` after reservations; undefined without a trusted total. */
  freeBlocks(rank: number): number | undefined {
    const total = this.geometry.totalBlocks(rank);
    return total === undefined ? undefined : Math.max(0, total - this.usedBlocks(rank));
  }

  /** The rank's prefill tokens without a first token yet: in the engine, and (with `queued`) waiting here too. */
  prefillTokensAhead(rank: number, queued = true): number {
    const r = this.rank(rank);
    return r.prefillTokens + (queued ? r.queuedTokens : 0);
  }

  reservedBlocks(rank: number): number {
    return this.rank(rank).reservedBlocks;
  }

  queuedBlocks(rank: number): number {
    return this.rank(rank).queuedBlocks;
  }

  /** Mean ms from slot to release of recent calls; undefined until one has ended. */
  get meanHoldMs(): number | undefined {
    return this.meanHoldValue;
  }

  /** Ranks seen so far (for gauges and /load). */
  get rankCount(): number {
    return this.ranks.length;
  }

  // ---- AdmissionBudget (the gate's calls) ----------------------------------------------------

  fits(cost: CallCost): boolean {
    const r = this.rank(cost.rank);
    if (r.inEngine === 0) return true;
    if (r.prefillTokens > 0 && r.prefillTokens + cost.promptTokens > this.prefillBudget()) return false;
    const total = this.geometry.totalBlocks(cost.rank);
    return total === undefined || this.usedBlocks(cost.rank) + cost.blocks <= total;
  }

  queued(cost: CallCost): void {
    if (cost.state !== 'new') return;
    cost.state = 'queued';
    const r = this.rank(cost.rank);
    r.queuedTokens += cost.promptTokens;
    r.queuedBlocks += cost.blocks;
  }

  unqueued(cost: CallCost): void {
    if (cost.state !== 'queued') return;
    this.leaveQueue(cost);
    cost.state = 'done';
  }

  take(cost: CallCost): void {
    if (cost.state === 'queued') this.leaveQueue(cost);
    else if (cost.state !== 'new') return;
    const r = this.rank(cost.rank);
    cost.state = 'prefill';
    cost.takenAt = this.now();
    cost.aheadAtTake = r.prefillTokens;
    r.prefillTokens += cost.promptTokens;
    r.reservedBlocks += cost.blocks;
    r.inEngine++;
  }

  firstToken(cost: CallCost): void {
    if (cost.state !== 'prefill') return;
    cost.state = 'decode';
    const r = this.rank(cost.rank);
    // The prefill it waited for: what was ahead of it, or what shared its step with it when more
    // came after it (an engine prefills a batch in one step, so every call in it has its first
    // token at the batch's time, the last admitted as much as the first).
    this.prefill.sample(Math.max(cost.aheadAtTake + cost.promptTokens, r.prefillTokens), this.now() - cost.takenAt);
    r.prefillTokens -= cost.promptTokens;
  }

  give(cost: CallCost): void {
    if (cost.state === 'queued') return this.unqueued(cost);
    if (cost.state !== 'prefill' && cost.state !== 'decode') return;
    const r = this.rank(cost.rank);
    if (cost.state === 'prefill') r.prefillTokens -= cost.promptTokens;
    r.reservedBlocks -= cost.blocks;
    r.inEngine--;
    cost.state = 'done';
    const held = this.now() - cost.takenAt;
    this.meanHoldValue = this.meanHoldValue === undefined ? held : this.meanHoldValue + HOLD_WEIGHT * (held - this.meanHoldValue);
  }

  private leaveQueue(cost: CallCost): void {
    const r = this.rank(cost.rank);
    r.queuedTokens -= cost.promptTokens;
    r.queuedBlocks -= cost.blocks;
  }
}
