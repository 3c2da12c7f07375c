/**
 * Maps an engine's Prometheus exposition to KV-cache load per data-parallel rank.
 *
 *   parseEngineMetrics(text, format = 'auto') -> { format?, ranks: Map<rank, ScrapedLoad>, problems }
 *
 * Never throws. A missing, NaN or out-of-range series leaves the fields that depend on it
 * undefined and adds one line to `problems` saying which series and why. With an explicit
 * format, every rank seen (or rank 0) is returned even if empty, so callers can tell "engine
 * up, numbers missing" from "nothing recognised" (auto mode: empty map plus a problem).
 *
 * Rank: the `engine` label (vLLM's dp rank index) or `dp_rank`; a series with neither applies
 * to every rank that lacks its own series of that name (config-info series are often
 * unlabelled), and with no labelled series at all it is rank 0.
 *
 * Per engine (names in docs/wire-facts.md, "Engine metrics"):
 * - vllm: perc = kv_cache_usage_perc (older gpu_cache_usage_perc), total/blockSize from
 *   cache_config_info labels, used = round(perc * total).
 * - sglang: blockSize = page_size, total = num_pages or floor(max_total_num_tokens / page_size),
 *   used = ceil(num_used_tokens / page_size), perc = token_usage or used/max tokens.
 * - trtllm-triton: block metric types max/used/free/tokens_per; used falls back to max - free.
 * - trtllm-serve: utilization, max_blocks, tokens_per_block; used = round(util * max).
 * Total blocks and block size go to `accept` too (the sidecar holds them to their flags' ranges),
 * named by series and label without the rank, so a refused one is said once, not once per rank.
 */
import { ANY_POSITIVE, type AcceptFact, type BoundedFact } from '../../protocol/engine/engine-facts.js';
import type { EngineMetricsFormat, EngineMetricsFormatOption } from '../../protocol/engine/metrics-formats.js';
import { parsePrometheusText, type Sample } from './prometheus-text.js';

export interface ScrapedLoad {
  kvUsedBlocks?: number;
  kvTotalBlocks?: number;
  /** 0..1 */
  kvUsagePerc?: number;
  blockSize?: number;
  running?: number;
  waiting?: number;
}

export interface EngineMetricsResult {
  format?: EngineMetricsFormat;
  ranks: Map<number, ScrapedLoad>;
  problems: string[];
}

const PREFIXES: ReadonlyArray<[string, EngineMetricsFormat]> = [
  ['vllm:', 'vllm'],
  ['sglang:', 'sglang'],
  ['nv_trt_llm_', 'trtllm-triton'],
  ['trtllm_', 'trtllm-serve'],
];

/** Picks the engine whose metric-name prefix occurs most often; undefined when none occurs. */
export function detectFormat(samples: readonly Sample[]): EngineMetricsFormat | undefined {
  const counts = new Map<EngineMetricsFormat, number>();
  for (const s of samples) {
    const hit = PREFIXES.find(([p]) => s.name.startsWith(p));
    if (hit) counts.set(hit[1], (counts.get(hit[1]) ?? 0) + 1);
  }
  let best: EngineMetricsFormat | undefined;
  for (const [f, n] of counts) if (best === undefined || n > counts.get(best)!) best = f;
  return best;
}

export function parseEngineMetrics(text: string, format: EngineMetricsFormatOption = 'auto', accept: AcceptFact = ANY_POSITIVE): EngineMetricsResult {
  const { samples, problems } = parsePrometheusText(text);
  const chosen = format === 'auto' ? detectFormat(samples) : format;
  if (chosen === undefined) {
    problems.push('no known engine metrics found (expected vllm:, sglang:, nv_trt_llm_ or trtllm_ series)');
    return { ranks: new Map(), problems };
  }
  const index = new RankIndex(samples, problems);
  const ranks = new Map<number, ScrapedLoad>();
  for (const rank of index.ranks()) {
    const view = new RankView(index, rank, problems, accept);
    ranks.set(rank, MAPPERS[chosen](view));
  }
  return { format: chosen, ranks, problems };
}

const ANY = -1;

/** Samples grouped by rank and name; unlabelled series are kept under ANY. */
class RankIndex {
  private readonly byRank = new Map<number, Sample[]>();

  constructor(samples: readonly Sample[], problems: string[]) {
    for (const s of samples) {
      const raw = s.labels['engine'] ?? s.labels['dp_rank'];
      let rank = ANY;
      if (raw !== undefined) {
        if (!/^\d{1,6}$/.test(raw)) {
          problems.push(`${s.name}: dp rank label ${JSON.stringify(raw)} is not a rank number; series ignored`);
          continue;
        }
        rank = Number(raw);
      }
      const list = this.byRank.get(rank) ?? [];
      list.push(s);
      this.byRank.set(rank, list);
    }
  }

  ranks(): number[] {
    const ranks = [...this.byRank.keys()].filter((r) => r !== ANY).sort((a, b) => a - b);
    return ranks.length > 0 ? ranks : [0];
  }

  find(rank: number, pick: (s: Sample) => boolean): Sample[] {
    const own = (this.byRank.get(rank) ?? []).filter(pick);
    return own.length > 0 ? own : (this.byRank.get(ANY) ?? []).filter(pick);
  }
}

/** A capacity (BoundedFact) is positive and then judged by `accept`. */
type Check = 'count' | 'ratio' | BoundedFact;

/** Typed, validated reads for one rank; every failed read explains itself once in problems. */
class RankView {
  constructor(
    private readonly index: RankIndex,
    readonly rank: number,
    private readonly problems: string[],
    private readonly accept: AcceptFact,
  ) {}

  /** Value of the single series `name` (matching `labels` if given), or undefined plus a problem. */
  value(name: string, check: Check, labels: Record<string, string> = {}, required = true): number | undefined {
    const found = this.index.find(this.rank, (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    const what = `${name}${Object.keys(labels).length ? JSON.stringify(labels) : ''} (rank ${this.rank})`;
    if (found.length === 0) {
      if (required) this.problems.push(`${what}: series missing`);
      return undefined;
    }
    if (found.length > 1) this.problems.push(`${what}: ${found.length} series, using the last`);
    return this.checked(what, found[found.length - 1]!.value, check, () => `${name}${Object.keys(labels).length ? JSON.stringify(labels) : ''}`);
  }

  /** A numeric label of an info-style series (value 1), e.g. cache_config_info{num_gpu_blocks}. */
  label(name: string, label: string, check: Check, required = true): number | undefined {
    const found = this.index.find(this.rank, (s) => s.name === name);
    const what = `${name}{${label}} (rank ${this.rank})`;
    const raw = found[found.length - 1]?.labels[label];
    if (raw === undefined || raw === '' || raw === 'None') {
      if (required) this.problems.push(`${what}: ${found.length === 0 ? 'series missing' : 'label missing'}`);
      return undefined;
    }
    return this.checked(what, Number(raw), check, () => `${name}{${label}}`);
  }

  has(name: string): boolean {
    return this.index.find(this.rank, (s) => s.name === name).length > 0;
  }

  /** `field`: the series without its rank, as the engine's name for a capacity. */
  private checked(what: string, v: number, check: Check, field: () => string): number | undefined {
    if (check !== 'count' && check !== 'ratio') {
      // 0 is "not told", as on the RPC wires; anything else (negative, NaN, huge) is the range check's to refuse.
      const accepted = v === 0 ? undefined : this.accept(check, field(), v);
      if (accepted === undefined) this.problems.push(`${what}: value ${v} is not a usable ${check}`);
      return accepted;
    }
    const ok = Number.isFinite(v) && (check === 'ratio' ? v >= 0 && v <= 1 : v >= 0);
    if (!ok) {
      this.problems.push(`${what}: value ${v} is not ${check === 'ratio' ? 'a ratio in 0..1' : 'a count'}`);
      return undefined;
    }
    return v;
  }
}

const MAPPERS: Record<EngineMetricsFormat, (v: RankView) => ScrapedLoad> = {
  vllm(v) {
    // vLLM before v1 called it gpu_cache_usage_perc.
    const percName = v.has('vllm:kv_cache_usage_perc') || !v.has('vllm:gpu_cache_usage_perc') ? 'vllm:kv_cache_usage_perc' : 'vllm:gpu_cache_usage_perc';
    const perc = v.value(percName, 'ratio');
    const total = v.label('vllm:cache_config_info', 'num_gpu_blocks', 'kvTotalBlocks');
    const blockSize = v.label('vllm:cache_config_info', 'block_size', 'kvBlockSize');
    return clean({
      kvUsagePerc: perc,
      kvTotalBlocks: total,
      kvUsedBlocks: perc !== undefined && total !== undefined ? Math.round(perc * total) : undefined,
      blockSize,
      running: v.value('vllm:num_requests_running', 'count'),
      waiting: v.value('vllm:num_requests_waiting', 'count'),
    });
  },
  sglang(v) {
    const page = v.label('sglang:cache_config_info', 'page_size', 'kvBlockSize');
    const pages = v.label('sglang:cache_config_info', 'num_pages', 'kvTotalBlocks', false);
    const usedTokens = v.value('sglang:num_used_tokens', 'count');
    // Tokens, held to a block count's range (there are fewer blocks than tokens).
    const maxTokens = v.value('sglang:max_total_num_tokens', 'kvTotalBlocks');
    const usage = v.value('sglang:token_usage', 'ratio', {}, false);
    const total = pages ?? (page !== undefined && maxTokens !== undefined ? Math.floor(maxTokens / page) : undefined);
    return clean({
      blockSize: page,
      kvTotalBlocks: total,
      kvUsedBlocks: page !== undefined && usedTokens !== undefined ? Math.ceil(usedTokens / page) : undefined,
      kvUsagePerc: usage ?? (usedTokens !== undefined && maxTokens !== undefined ? Math.min(1, usedTokens / maxTokens) : undefined),
      running: v.value('sglang:num_running_reqs', 'count'),
      waiting: v.value('sglang:num_queue_reqs', 'count'),
    });
  },
  'trtllm-triton'(v) {
    const metric = 'nv_trt_llm_kv_cache_block_metrics';
    const max = v.value(metric, 'kvTotalBlocks', { kv_cache_block_type: 'max' });
    const free = v.value(metric, 'count', { kv_cache_block_type: 'free' }, false);
    const used =
      v.value(metric, 'count', { kv_cache_block_type: 'used' }, free === undefined) ??
      (max !== undefined && free !== undefined ? Math.max(0, max - free) : undefined);
    return clean({
      kvTotalBlocks: max,
      kvUsedBlocks: used,
      kvUsagePerc: used !== undefined && max !== undefined ? Math.min(1, used / max) : undefined,
      blockSize: v.value(metric, 'kvBlockSize', { kv_cache_block_type: 'tokens_per' }),
    });
  },
  'trtllm-serve'(v) {
    const util = v.value('trtllm_kv_cache_utilization', 'ratio');
    const max = v.value('trtllm_kv_cache_max_blocks', 'kvTotalBlocks');
    return clean({
      kvUsagePerc: util,
      kvTotalBlocks: max,
      kvUsedBlocks: util !== undefined && max !== undefined ? Math.round(util * max) : undefined,
      blockSize: v.value('trtllm_kv_cache_tokens_per_block', 'kvBlockSize'),
    });
  },
};

/** Drops undefined fields so results compare and print cleanly. */
function clean(load: { [K in keyof ScrapedLoad]: ScrapedLoad[K] | undefined }): ScrapedLoad {
  const out: ScrapedLoad = {};
  for (const [k, val] of Object.entries(load) as [keyof ScrapedLoad, number | undefined][]) if (val !== undefined) out[k] = val;
  return out;
}
