/**
 * The seed's busy rules, as pure functions (no clock, no state, no latch):
 *
 *   rank busy   = any configured check fires on the rank's latest fresh load
 *     decode    : (kv_used_blocks ?? active_decode_blocks) > threshold * kv_total_blocks
 *     prefill   : active_prefill_tokens > threshold
 *     frac      : active_prefill_tokens > threshold_frac * max_num_batched_tokens
 *     ttft      : predicted_ttft_ms > maxPredictedTtftMs (ours, not Dynamo's; off unless given)
 *   worker busy = every rank busy (one free rank keeps the worker free)
 *
 * Unset checks are skipped; with none set nothing is ever busy. A check whose input is missing
 * (no kv_total_blocks, no max_num_batched_tokens, no counter) does not fire and is reported in
 * `missing`, so the operator can see why a threshold does nothing. Unknown load (no event yet,
 * or stale) is free: a worker can never stay busy on old news. An unknown prediction (an older
 * sidecar, a Dynamo worker, no first token yet) never fires the ttft check and is not reported
 * missing: a new worker has none until its first call, which is no misconfiguration. Dynamo latches the decode check
 * (its issue 10564: stuck busy); here every decision is made from the current numbers only.
 */
import type { BusyCheck, BusyRule, Thresholds } from './contracts.js';
import { requestTtftMs, type RankReport } from './load-report.js';

export interface MissingInput {
  readonly check: BusyCheck;
  readonly reason: string;
}

export interface RankVerdict {
  readonly busy: boolean;
  /** Checks that fired (empty when free). */
  readonly fired: readonly BusyRule[];
  /** Configured checks that could not be evaluated on this rank. */
  readonly missing: readonly MissingInput[];
}

const FREE: RankVerdict = Object.freeze({ busy: false, fired: Object.freeze([]), missing: Object.freeze([]) });

/**
 * `load` undefined means unknown (no event, or stale): free. `maxPredictedTtftMs` null (or 0,
 * as the flag's "off") turns the ttft check off.
 */
export function judgeRank(load: RankReport | undefined, thresholds: Thresholds, maxPredictedTtftMs: number | null = null, promptTokens = 0): RankVerdict {
  if (load === undefined) return FREE;
  const fired: BusyRule[] = [];
  const missing: MissingInput[] = [];

  const decode = thresholds.active_decode_blocks_threshold;
  if (decode !== null) {
    const used = load.kvUsedBlocks ?? load.activeDecodeBlocks;
    const total = load.kvTotalBlocks;
    if (used === undefined) missing.push({ check: 'active_decode_blocks_threshold', reason: 'neither kv_used_blocks nor active_decode_blocks is reported' });
    else if (total === undefined || total === 0) missing.push({ check: 'active_decode_blocks_threshold', reason: 'kv_total_blocks unknown' });
    else if (used > decode * total) fired.push('active_decode_blocks_threshold');
  }

  const prefill = load.activePrefillTokens;
  const absolute = thresholds.active_prefill_tokens_threshold;
  if (absolute !== null) {
    if (prefill === undefined) missing.push({ check: 'active_prefill_tokens_threshold', reason: 'active_prefill_tokens is not reported' });
    else if (prefill > absolute) fired.push('active_prefill_tokens_threshold');
  }
  const frac = thresholds.active_prefill_tokens_threshold_frac;
  if (frac !== null) {
    if (prefill === undefined) missing.push({ check: 'active_prefill_tokens_threshold_frac', reason: 'active_prefill_tokens is not reported' });
    else if (load.maxNumBatchedTokens === undefined || load.maxNumBatchedTokens === 0) {
      missing.push({ check: 'active_prefill_tokens_threshold_frac', reason: 'max_num_batched_tokens unknown' });
    } else if (prefill > frac * load.maxNumBatchedTokens) fired.push('active_prefill_tokens_threshold_frac');
  }
  if (maxPredictedTtftMs) {
    // The request's own prediction where the sidecar publishes its model (--ttft-slo-ms), else the
    // worker's. A worker with no prefill ahead is never busy by its model, as its sidecar never
    // refuses such a call: that call is the probe that relearns an engine faster than its model says.
    const predicted = requestTtftMs(load, promptTokens);
    const probe = load.ttftModel !== undefined && (load.prefillTokensAhead ?? 0) === 0;
    if (predicted !== undefined && predicted > maxPredictedTtftMs && !probe) fired.push('max_predicted_ttft_ms');
  }
  return { busy: fired.length > 0, fired, missing };
}

export interface WorkerVerdict {
  readonly busy: boolean;
  /** Union of the checks that fired on its ranks (when busy). */
  readonly fired: readonly BusyRule[];
  readonly missing: readonly MissingInput[];
}

/** A worker is busy only when all its ranks are; a worker with no rank known is free. */
export function judgeWorker(
  ranks: readonly (RankReport | undefined)[],
  thresholds: Thresholds,
  maxPredictedTtftMs: number | null = null,
  promptTokens = 0,
): WorkerVerdict {
  if (ranks.length === 0) return FREE;
  const verdicts = ranks.map((rank) => judgeRank(rank, thresholds, maxPredictedTtftMs, promptTokens));
  const busy = verdicts.every((v) => v.busy);
  const fired = busy ? [...new Set(verdicts.flatMap((v) => v.fired))] : [];
  const seen = new Set<string>();
  const missing = verdicts.flatMap((v) => v.missing).filter((m) => !seen.has(m.check + m.reason) && seen.add(m.check + m.reason));
  return { busy, fired, missing };
}
