/**
 * The decision of --ttft-slo-ms, in one place: for an arriving call with a cost (kv-ledger.ts),
 * refuse it now when its predicted TTFT (ttft-prediction.ts, from the learned prefill model
 * and the ledger) cannot meet the SLO or its own deadline; otherwise let it go to the gate, which
 * admits it when its slot and its blocks are free, or queues it for at most the time its SLO
 * leaves after its own prefill (its queue budget).
 *
 * It predicts on projected load, not on this instant's (Mooncake's lesson: rejecting on current
 * load oscillates): the prefill tokens ahead include the calls queued here, and the KV room it
 * waits for counts the queued calls' blocks as taken.
 *
 * The KV wait: when the call's blocks do not fit beside those reserved and queued, it waits for
 * enough calls to end; with the reserved blocks spread over calls whose ends are spread over the
 * mean hold time, a deficit of d blocks out of R reserved takes about (d / R) x the mean hold.
 *
 * The prefill budget (the ledger holds calls beyond it in the queue): the prompt tokens the engine
 * can prefill within the SLO after its base, rate x (SLO - base), and at least one step's worth
 * (max_num_batched_tokens). Without a learned model (fewer than 5 first tokens) nothing is refused
 * by prediction and the budget is one step's worth: the first calls are let in a step at a time
 * while the model learns, not all at once. N and Q stay hard ceilings throughout.
 */
import { ownPrefillMs, predictTtftMs, type PrefillModel } from '../../protocol/ttft-prediction.js';
import type { CallCost, KvLedger } from './kv-ledger.js';
import type { PrefillLearner } from './prefill-model.js';

/** vLLM's max_num_batched_tokens on smaller GPUs, for an engine that does not say its own. */
export const DEFAULT_STEP_TOKENS = 2048;

export type SloRefusalReason = 'kv_budget' | 'predicted_ttft';

export type SloVerdict =
  | { readonly kind: 'refuse'; readonly reason: SloRefusalReason; readonly predictedMs: number; readonly pushbackMs: number }
  /** Go to the gate; if queued, for at most queueBudgetMs. */
  | { readonly kind: 'go'; readonly predictedMs: number | undefined; readonly queueBudgetMs: number };

export interface SloPrediction {
  /** Undefined without a learned model. */
  readonly ttftMs: number | undefined;
  readonly kvWaitMs: number;
  /** The call's own prefill, base included (what it needs after any wait). */
  readonly ownPrefillMs: number | undefined;
}

export class SloAdmission {
  /** The last arriving call's prediction (the gauge), ms. */
  lastPredictedMs: number | undefined;

  constructor(
    readonly ttftSloMs: number,
    private readonly ledger: KvLedger,
    private readonly prefill: PrefillLearner,
    /** The engine's max_num_batched_tokens, when known. */
    private readonly stepTokens: () => number | undefined = () => undefined,
  ) {}

  /** Prefill tokens the engine may hold without a first token (see the header). */
  prefillBudget(): number {
    const step = this.stepTokens() ?? DEFAULT_STEP_TOKENS;
    const model = this.prefill.model;
    if (!model) return step;
    return Math.max(step, (model.tokensPerS * Math.max(0, this.ttftSloMs - model.baseMs)) / 1000);
  }

  get model(): PrefillModel | undefined {
    return this.prefill.model;
  }

  /** The wait for KV room a call of `blocks` on `rank` would have now, ms (0 when it fits, or nothing is known). */
  kvWaitMs(rank: number, blocks: number): number {
    const free = this.ledger.freeBlocks(rank);
    const hold = this.ledger.meanHoldMs;
    const reserved = this.ledger.reservedBlocks(rank);
    // With none of our calls in the engine the call goes in at once (the ledger's rule); what the
    // engine counts used then (its prefix cache, other clients) frees on no schedule we know.
    if (free === undefined || hold === undefined || reserved === 0) return 0;
    const deficit = this.ledger.queuedBlocks(rank) + blocks - free;
    if (deficit <= 0) return 0;
    return (Math.min(deficit, reserved) / reserved) * hold;
  }

  predict(cost: CallCost): SloPrediction {
    const kvWaitMs = this.kvWaitMs(cost.rank, cost.blocks);
    const model = this.prefill.model;
    if (!model) return { ttftMs: undefined, kvWaitMs, ownPrefillMs: undefined };
    const ttftMs = predictTtftMs(model, { prefillTokensAhead: this.ledger.prefillTokensAhead(cost.rank), promptTokens: cost.promptTokens, kvWaitMs });
    return { ttftMs, kvWaitMs, ownPrefillMs: ownPrefillMs(model, cost.promptTokens) };
  }

  /** For a call arriving now, with `deadlineLeftMs` of its own deadline (undefined: none). */
  judge(cost: CallCost, deadlineLeftMs: number | undefined): SloVerdict {
    const limit = deadlineLeftMs === undefined ? this.ttftSloMs : Math.min(this.ttftSloMs, deadlineLeftMs); // Infinity reads as none
    const { ttftMs, kvWaitMs, ownPrefillMs: own } = this.predict(cost);
    const predictedMs = ttftMs ?? (kvWaitMs > 0 ? kvWaitMs : undefined);
    this.lastPredictedMs = predictedMs;
    // A call with nothing ahead of it is never refused by prediction: it is the probe that
    // relearns an engine that got faster (a model learned in a burst would otherwise refuse for ever).
    const nothingAhead = kvWaitMs === 0 && this.ledger.prefillTokensAhead(cost.rank) === 0;
    if (predictedMs !== undefined && predictedMs > limit && !nothingAhead) {
      // Which budget ran out: the KV room, when waiting for it is most of the prediction.
      const reason: SloRefusalReason = kvWaitMs > 0 && kvWaitMs >= predictedMs - kvWaitMs ? 'kv_budget' : 'predicted_ttft';
      // The pushback is the predicted wait: by then the work ahead of it has gone.
      const pushbackMs = Math.max(1, Math.round(predictedMs - (own ?? 0)));
      return { kind: 'refuse', reason, predictedMs, pushbackMs };
    }
    // Queued no longer than leaves time for the prefill already in the engine and its own: a call
    // let in later than that would miss its SLO in the engine, where it can no longer go elsewhere.
    const model = this.prefill.model;
    const engineAhead = model
      ? predictTtftMs(model, { prefillTokensAhead: this.ledger.prefillTokensAhead(cost.rank, false), promptTokens: cost.promptTokens })
      : 0;
    return { kind: 'go', predictedMs, queueBudgetMs: Math.max(1, Math.round(limit - engineAhead)) };
  }
}
