/**
 * The pure part of the overload scenarios `classes` and `tenants` (bench/overload/): the loads of
 * a point, the figures read from the load client's summaries, and the goals' verdicts. Every
 * share is of the requests a class or tenant offered: its first attempts (the scenarios do not
 * retry, so that is every attempt it sent).
 */
import type { LoadSummary } from '../../src/tools/load/stats.js';
import { spread, type Spread } from './stats.js';

/** The two classes of the `classes` scenario: priority 0 runs before priority 1 (lower runs sooner). */
export const HIGH_PRIORITY = 0;
export const LOW_PRIORITY = 1;

export interface ClassLoad {
  readonly name: 'high' | 'low';
  readonly priority: number;
  /** Requests per second this class offers. */
  readonly rate: number;
}

/** A point's two classes: `highShare` of the total rate at the high priority, the rest at the low one. */
export function classLoads(totalRate: number, highShare: number): readonly ClassLoad[] {
  if (!(totalRate > 0) || !(highShare > 0 && highShare < 1))
    throw new RangeError(`need a rate > 0 and a high share in (0, 1), got ${totalRate} and ${highShare}`);
  return [
    { name: 'high', priority: HIGH_PRIORITY, rate: totalRate * highShare },
    { name: 'low', priority: LOW_PRIORITY, rate: totalRate * (1 - highShare) },
  ];
}

export interface TenantLoad {
  readonly tenant: string;
  readonly polite: boolean;
  readonly rate: number;
}

export interface TenantMix {
  /** Requests per second the system serves within the SLO (C). */
  readonly capacity: number;
  /** What the polite tenants offer together, as a share of C; each offers an equal part: its fair share. */
  readonly politeShare: number;
  readonly politeTenants: number;
  /** The noisy tenant offers this many times a polite tenant's share. */
  readonly noisyFactor: number;
  /** Whether the noisy tenant runs at all: the scenario compares each run with and without it. */
  readonly withNoisy: boolean;
}

/** The tenants of a run: polite-1..polite-n at their fair share each, then the noisy one (if any). */
export function tenantLoads(mix: TenantMix): readonly TenantLoad[] {
  const { capacity, politeShare, politeTenants, noisyFactor } = mix;
  if (!(capacity > 0 && politeShare > 0 && noisyFactor > 0) || !Number.isInteger(politeTenants) || politeTenants < 1) {
    throw new RangeError(`need a capacity, polite share and noisy factor > 0 and at least one polite tenant, got ${JSON.stringify(mix)}`);
  }
  const share = (capacity * politeShare) / politeTenants;
  const polite = Array.from({ length: politeTenants }, (_, i) => ({ tenant: `polite-${i + 1}`, polite: true, rate: share }));
  return mix.withNoisy ? [...polite, { tenant: 'noisy', polite: false, rate: share * noisyFactor }] : polite;
}

/** What the tables show of one or several load runs taken together (several: their counts added). */
export interface LoadFigures {
  /** Requests offered: first attempts. */
  readonly offered: number;
  /** Completed within the SLO. */
  readonly good: number;
  /** Good requests per second of arrivals. */
  readonly goodputPerS: number;
  /** good / offered, 0..1; NaN when nothing was offered. */
  readonly goodShare: number;
  /** Shares of the offered answered 529 (fleet full) and 429 (the tenant at its cap), 0..1. */
  readonly share529: number;
  readonly share429: number;
  /** The TTFT p50 and p99 of admitted requests; with several runs, the highest of theirs. */
  readonly ttftP50: number;
  readonly ttftP99: number;
}

/** The figures of runs of `pointS` seconds of arrivals each, taken together. */
export function loadFigures(summaries: readonly LoadSummary[], pointS: number): LoadFigures {
  let offered = 0;
  let good = 0;
  let capped = 0;
  let rejected = 0;
  for (const s of summaries) {
    offered += s.sent - s.retries;
    good += s.slo?.good ?? 0;
    capped += s.tenant_capped ?? 0;
    rejected += s.rejected;
  }
  const share = (n: number): number => (offered === 0 ? NaN : n / offered);
  const worst = (pick: (s: LoadSummary) => number | null): number => Math.max(...summaries.map((s) => pick(s) ?? NaN).filter(Number.isFinite));
  const ttftP50 = worst((s) => s.ttft_ms.p50);
  const ttftP99 = worst((s) => s.ttft_ms.p99);
  return {
    offered,
    good,
    goodputPerS: good / pointS,
    goodShare: share(good),
    share529: share(rejected - capped),
    share429: share(capped),
    ttftP50: Number.isFinite(ttftP50) ? ttftP50 : NaN,
    ttftP99: Number.isFinite(ttftP99) ? ttftP99 : NaN,
  };
}

/** One run of the `classes` scenario: a configuration at a multiple of C, each class's summary. */
export interface ClassesRun {
  readonly config: string;
  readonly multiple: number;
  readonly repeat: number;
  readonly classes: Readonly<Record<ClassLoad['name'], LoadSummary>>;
}

export interface Verdict {
  readonly met: boolean;
  /** One line saying what was asked, what was measured and whether it was met. */
  readonly text: string;
}

/**
 * The classes goal for one configuration: at every multiple up to `upTo`, the high class's good
 * requests are at least `target` of those it offered, over all repeats together (a ratio of counts
 * pooled over repeats: with few high requests a point, one repeat's ratio moves in coarse steps).
 */
export function classesVerdict(runs: readonly ClassesRun[], config: string, pointS: number, upTo = 4, target = 0.99): Verdict {
  const multiples = [...new Set(runs.filter((r) => r.config === config && r.multiple <= upTo).map((r) => r.multiple))].sort((a, b) => a - b);
  if (multiples.length === 0) return { met: false, text: `${config}: no point at or below ${upTo}x C was run, so the goal is not judged` };
  const ratios = multiples.map((m) => {
    const high = loadFigures(
      runs.filter((r) => r.config === config && r.multiple === m).map((r) => r.classes.high),
      pointS,
    );
    return { multiple: m, ratio: high.goodShare, good: high.good, offered: high.offered };
  });
  const worst = ratios.reduce((a, b) => (b.ratio < a.ratio || Number.isNaN(b.ratio) ? b : a));
  const met = ratios.every((r) => r.ratio >= target);
  const list = ratios.map((r) => `${r.multiple}x ${(100 * r.ratio).toFixed(1)}% (${r.good}/${r.offered})`).join(', ');
  return {
    met,
    text: `${config}: high-priority goodput / offered ${list}; goal >= ${(100 * target).toFixed(0)}% at every point up to ${upTo}x C: ${met ? 'MET' : `MISSED (lowest ${(100 * worst.ratio).toFixed(1)}% at ${worst.multiple}x)`}`,
  };
}

/** One run of the `tenants` scenario: a configuration with or without the noisy tenant, each tenant's summary. */
export interface TenantsRun {
  readonly config: string;
  readonly withNoisy: boolean;
  readonly repeat: number;
  readonly tenants: readonly { readonly tenant: string; readonly polite: boolean; readonly summary: LoadSummary }[];
}

const politeOf = (run: TenantsRun): LoadSummary[] => run.tenants.filter((t) => t.polite).map((t) => t.summary);

/**
 * How much the polite tenants' goodput drops when the noisy tenant joins, for one configuration:
 * 1 - (their good requests with it) / (without it), per repeat (the same seeds, so the same polite
 * arrivals, in both) and over all repeats together. Negative: they did better with it.
 */
export function politeDrop(runs: readonly TenantsRun[], config: string): { readonly pooled: number; readonly perRepeat: Spread } {
  const of = (withNoisy: boolean, repeat?: number): number =>
    runs
      .filter((r) => r.config === config && r.withNoisy === withNoisy && (repeat === undefined || r.repeat === repeat))
      .reduce((sum, r) => sum + loadFigures(politeOf(r), 1).good, 0);
  const drop = (withIt: number, without: number): number => (without === 0 ? NaN : 1 - withIt / without);
  const repeats = [...new Set(runs.filter((r) => r.config === config).map((r) => r.repeat))];
  return { pooled: drop(of(true), of(false)), perRepeat: spread(repeats.map((k) => drop(of(true, k), of(false, k)))) };
}

/** The tenants goal for one configuration: the polite tenants' goodput drops by less than `maxDrop` when the noisy one joins. */
export function tenantsVerdict(runs: readonly TenantsRun[], config: string, maxDrop = 0.05): Verdict {
  const { pooled, perRepeat } = politeDrop(runs, config);
  if (Number.isNaN(pooled))
    return { met: false, text: `${config}: no run both with and without the noisy tenant (or no polite request was good), so the goal is not judged` };
  const pct = (v: number): string => `${(100 * v).toFixed(1)}%`;
  const spreadText = perRepeat.n > 1 ? ` (per repeat ${pct(perRepeat.median)} [${pct(perRepeat.min)}..${pct(perRepeat.max)}])` : '';
  const met = pooled < maxDrop;
  return {
    met,
    text: `${config}: the polite tenants' goodput drops by ${pct(pooled)} with the noisy tenant${spreadText}; goal < ${pct(maxDrop)}: ${met ? 'MET' : 'MISSED'}`,
  };
}
