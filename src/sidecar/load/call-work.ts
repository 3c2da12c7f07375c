/**
 * Admission by work (--ttft-slo-ms) for the engine's Generate calls: what a call costs, from its
 * first request message (decoded with the --generate-wire layout, as the traffic accounting
 * does) and its dp rank, and the decision on that cost (slo-admission.ts). The proxy asks it
 * through CallWork (call-context.ts); the KV figures come from the load tracker's view of the
 * engine (KvGeometry).
 *
 * A message that cannot be decoded (compressed, malformed, text the wire does not carry) counts
 * at UNDECODED_PROMPT_TOKENS and the learned output: it is never refused for being unreadable,
 * and never strands a slot.
 */
import type { IncomingHttpHeaders } from 'node:http2';
import { Gauge, type Registry } from 'prom-client';
import { ENGINE_PATHS, decodeGenerateRequest, type GenerateWire } from '../../protocol/engine/generate-wire.js';
import { DP_RANK_HEADER, LEGACY_DP_RANK_HEADER, type WorkLoadFields } from '../../protocol/load-event.js';
import type { AdmissionGate } from '../admission/gate.js';
import { KvLedger, type CallCost, type KvGeometry } from '../admission/kv-ledger.js';
import { OutputLengths } from '../admission/output-lengths.js';
import { PrefillLearner } from '../admission/prefill-model.js';
import { SloAdmission, type SloVerdict } from '../admission/slo-admission.js';
import type { LoadReporting } from './load-reporting.js';
import type { CallWork } from '../proxy/call-context.js';
import { parseDpRankHeader, type LoadTracker } from './load-tracker.js';

/** The peek's bounds: gRPC's default largest message (4 MiB), and how long a body may take to bring its first message. */
export const MAX_PEEK_MESSAGE_BYTES = 4 * 1024 * 1024;
export const PEEK_TIMEOUT_MS = 5000;

export class GenerateWork implements CallWork {
  readonly maxMessageBytes = MAX_PEEK_MESSAGE_BYTES;
  readonly peekTimeoutMs = PEEK_TIMEOUT_MS;
  private readonly paths: readonly string[];

  constructor(
    private readonly wire: GenerateWire,
    private readonly tracker: LoadTracker,
    private readonly ledger: KvLedger,
    private readonly slo: SloAdmission,
  ) {
    this.paths = ENGINE_PATHS[wire].generate;
  }

  wants(path: string | undefined): boolean {
    return path !== undefined && this.paths.includes(path);
  }

  costOf(headers: IncomingHttpHeaders, firstMessage: Uint8Array | undefined): CallCost {
    const info = firstMessage && decodeGenerateRequest(firstMessage, this.wire);
    const size = this.tracker.dataParallelSize;
    let { rank } = parseDpRankHeader(headers[DP_RANK_HEADER] ?? headers[LEGACY_DP_RANK_HEADER], size);
    if (info && info.dataParallelRank !== undefined) rank = info.dataParallelRank < size ? info.dataParallelRank : 0;
    return this.ledger.costOf(rank, info ? info.promptTokens : undefined, info ? info.maxTokens : undefined);
  }

  judge(cost: unknown, deadlineLeftMs: number | undefined): SloVerdict {
    return this.slo.judge(cost as CallCost, deadlineLeftMs);
  }
}

/** The tracker's KV figures as the ledger reads them. */
export function trackerGeometry(tracker: LoadTracker): KvGeometry {
  return {
    totalBlocks: (rank) => tracker.kvTotalBlocksOf(rank),
    blockSize: (rank) => tracker.kvBlockSizeOf(rank),
    usedBlocks: (rank) => tracker.kvUsedBlocksOf(rank),
  };
}

/**
 * --ttft-slo-ms, composed: the learners, the ledger (the gate's budget), the decision, the
 * proxy's CallWork, its gauges and its view for GET /load and the status page.
 */
export class WorkAdmission {
  readonly prefill = new PrefillLearner();
  readonly outputs = new OutputLengths();
  readonly ledger: KvLedger;
  readonly slo: SloAdmission;
  readonly work: GenerateWork;

  constructor(
    ttftSloMs: number,
    private readonly reporting: LoadReporting,
    gate: AdmissionGate,
    wire: GenerateWire,
    now: () => number,
    registry: Registry,
  ) {
    const tracker = reporting.tracker;
    this.ledger = new KvLedger(trackerGeometry(tracker), this.prefill, this.outputs, now, () => this.slo.prefillBudget());
    this.slo = new SloAdmission(ttftSloMs, this.ledger, this.prefill, () => tracker.maxNumBatchedTokens);
    this.work = new GenerateWork(wire, tracker, this.ledger, this.slo);
    gate.setBudget(this.ledger);
    // More blocks known or fewer used by the engine's own figure: queued calls may fit now.
    tracker.onChange(() => gate.budgetChanged());
    reporting.onCallCompleted((tokens) => this.outputs.completed(tokens));
    tracker.setWorkFields((rank) => this.loadFields(rank));
    registerWorkMetrics(registry, this);
  }

  /** The ranks the ledger and the engine know of. */
  private ranks(): number[] {
    const count = Math.max(this.ledger.rankCount, this.reporting.tracker.dataParallelSize);
    return Array.from({ length: count }, (_, i) => i);
  }

  /** A rank's load-event fields (WorkLoadFields): a frontend predicts with them for a prompt of its own. */
  loadFields(rank: number): WorkLoadFields {
    const model = this.prefill.model;
    return {
      prefill_tokens_ahead: this.ledger.prefillTokensAhead(rank),
      ttft_base_ms: model ? Math.round(model.baseMs) : null,
      prefill_tokens_per_s: model ? Math.round(model.tokensPerS) : null,
      kv_free_blocks: this.ledger.freeBlocks(rank) ?? null,
      kv_block_size: this.reporting.tracker.kvBlockSizeOf(rank),
    };
  }

  /** For GET /load and the status page (snake_case, as the rest of /load). */
  view(): Record<string, unknown> {
    const model = this.prefill.model;
    return {
      ttft_slo_ms: this.slo.ttftSloMs,
      prefill_tokens_per_s: model ? Math.round(model.tokensPerS) : null,
      ttft_base_ms: model ? Math.round(model.baseMs) : null,
      prefill_samples: this.prefill.samples,
      output_tokens_p90: this.outputs.quantile ?? null,
      output_samples: this.outputs.samples,
      last_predicted_ttft_ms: this.slo.lastPredictedMs === undefined ? null : Math.round(this.slo.lastPredictedMs),
      mean_hold_ms: this.ledger.meanHoldMs === undefined ? null : Math.round(this.ledger.meanHoldMs),
      prefill_budget_tokens: Math.round(this.slo.prefillBudget()),
      ranks: this.ranks().map((rank) => ({
        dp_rank: rank,
        prefill_tokens_ahead: this.ledger.prefillTokensAhead(rank),
        kv_reserved_blocks: this.ledger.reservedBlocks(rank),
        kv_queued_blocks: this.ledger.queuedBlocks(rank),
        kv_free_blocks: this.ledger.freeBlocks(rank) ?? null,
        kv_block_size: this.reporting.tracker.kvBlockSizeOf(rank),
      })),
    };
  }
}

function registerWorkMetrics(registry: Registry, admission: WorkAdmission): void {
  const registers = [registry];
  const { prefill, outputs, ledger, slo } = admission;
  const scalar = (name: string, help: string, read: () => number | undefined): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.reset();
        const value = read();
        if (value !== undefined) this.set(value);
      },
    });
  };
  scalar('dynamo_sidecar_ttft_slo_seconds', 'The TTFT SLO admission works to (--ttft-slo-ms).', () => slo.ttftSloMs / 1000);
  scalar(
    'dynamo_sidecar_prefill_tokens_per_second',
    "The engine's prefill rate learned from first tokens; absent until 5 first tokens.",
    () => prefill.model?.tokensPerS,
  );
  scalar(
    'dynamo_sidecar_ttft_base_seconds',
    'The part of a first token that does not grow with the prompt, learned, at the 90th percentile; absent until 5 first tokens.',
    () => (prefill.model ? prefill.model.baseMs / 1000 : undefined),
  );
  scalar(
    'dynamo_sidecar_output_tokens_p90',
    "The 90th percentile of completed calls' output tokens, reserved for in KV; absent until 16 completed calls.",
    () => outputs.quantile,
  );
  scalar(
    'dynamo_sidecar_predicted_ttft_seconds',
    "The last arriving Generate call's predicted TTFT (prefill ahead + its own + its wait for KV room); absent while unknown.",
    () => (slo.lastPredictedMs === undefined ? undefined : slo.lastPredictedMs / 1000),
  );
  const perRank = (name: string, help: string, read: (rank: number) => number | undefined): void => {
    new Gauge({
      name,
      help,
      labelNames: ['dp_rank'],
      registers,
      collect() {
        this.reset();
        for (let rank = 0; rank < Math.max(1, ledger.rankCount); rank++) {
          const value = read(rank);
          if (value !== undefined) this.set({ dp_rank: String(rank) }, value);
        }
      },
    });
  };
  perRank('dynamo_sidecar_kv_reserved_blocks', 'KV blocks reserved for the Generate calls in the engine (prompt + expected output), per dp rank.', (r) =>
    ledger.reservedBlocks(r),
  );
  perRank(
    'dynamo_sidecar_kv_free_blocks',
    "KV blocks free after reservations (the larger of ours and the engine's used), per dp rank; absent without a known total.",
    (r) => ledger.freeBlocks(r),
  );
  perRank('dynamo_sidecar_prefill_tokens_ahead', 'Prefill tokens admitted or queued that have not had their first token, per dp rank.', (r) =>
    ledger.prefillTokensAhead(r),
  );
}
