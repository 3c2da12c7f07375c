/** The shapes every scenario shares: options, the roster of targets, rows per round, paired figures. */
import type { CpuPlan } from '../lib/affinity.js';
import type { ForeignLoad } from '../lib/foreign-load.js';
import type { Spread } from '../lib/stats.js';

export interface BenchOptions {
  readonly quick: boolean;
  readonly rounds: number;
  readonly scenarios: readonly string[];
  /** Target kinds to run (direct, sidecar, baseline, haproxy, nginx); sidecar covers every sidecar Node. */
  readonly targets: readonly string[];
  readonly out: string | undefined;
  readonly profile: boolean;
  readonly pin: boolean;
  /** Extra Node binaries for sidecar rows (--sidecar-node, repeatable). */
  readonly sidecarNodes: readonly string[];
  /** Fetch Node 24 and add its row when no --sidecar-node is given. */
  readonly node24: boolean;
  /** --upstream-connections: one row per K for each sidecar row; empty: one row, at the sidecar's default. */
  readonly upstreamConnections: readonly number[];
  /** Git revision to build and run as the baseline@REV row (A/B of code changes). */
  readonly baseline: string | undefined;
  readonly timeLimitMin: number;
}

/** One way of running the sidecar: which Node binary, which build. */
export interface SidecarVariant {
  /** Row label: "sidecar", "sidecar@node24.11.0", "baseline@HEAD~1". */
  readonly label: string;
  /** sidecar rows are judged against the goals; the baseline row is the A/B reference. */
  readonly role: 'sidecar' | 'baseline';
  readonly node: string;
  readonly nodeVersion: string;
  /** The compiled CLI entry (dist/cli/main.js of this tree or of the baseline build). */
  readonly main: string;
  /** Started with --upstream-connections K; undefined: the sidecar's default. */
  readonly upstreamConnections?: number;
}

/** What runs in this invocation, after --targets, --sidecar-node, --baseline and what is installed. */
export interface Roster {
  readonly direct: boolean;
  readonly haproxy: boolean;
  readonly nginx: boolean;
  readonly sidecars: readonly SidecarVariant[];
}

export interface BenchContext {
  readonly options: BenchOptions;
  readonly plan: CpuPlan;
  /** Temp dir for configs, pid files, logs and profiles of this run. */
  readonly dir: string;
  readonly roster: Roster;
  log(message: string): void;
}

export interface MetricDef {
  readonly key: string;
  readonly label: string;
  readonly digits?: number;
}

export type Figures = Record<string, number>;

export interface Row {
  readonly target: string;
  /** Figures of each round, indexed by round; null when that round's measurement failed. */
  readonly rounds: (Figures | null)[];
  /** median [min..max] of each figure over the rounds. */
  summary: Record<string, Spread>;
}

/** A figure of one row against the same figure of another row, round by round. */
export interface PairDef {
  readonly metric: string;
  /** ratio: a / b of the same round; diff: a - b of the same round (latency added, in us). */
  readonly op: 'ratio' | 'diff';
  readonly label: string;
  readonly digits?: number;
}

export interface Paired {
  readonly numerator: string;
  readonly denominator: string;
  readonly metric: string;
  readonly op: 'ratio' | 'diff';
  readonly label: string;
  readonly digits: number;
  readonly perRound: (number | null)[];
  readonly summary: Spread;
}

/** Which rows a scenario pairs with which (the denominator is a target kind or "baseline"). */
export interface PairSpec {
  /** sidecars: every sidecar row; proxies: every row but direct (baseline included). */
  readonly numerators: 'sidecars' | 'proxies';
  readonly denominator: 'haproxy' | 'nginx' | 'direct';
  readonly defs: readonly PairDef[];
}

export interface Warmup {
  readonly target: string;
  readonly unit: string;
  /** Proxy CPU per unit in each warm-up slice. */
  readonly slices: number[];
  /** null: nothing to judge (direct has no proxy CPU). */
  readonly settled: boolean | null;
}

export interface ScenarioResult {
  readonly id: string;
  readonly title: string;
  /** How each figure was measured, printed with the table. */
  readonly method: readonly string[];
  readonly metrics: readonly MetricDef[];
  readonly rows: Row[];
  paired: Paired[];
  readonly warmups: Warmup[];
  readonly errors: string[];
  durationS: number;
  /** CPU other processes on the machine used meanwhile. */
  foreignLoad?: ForeignLoad;
  extra?: Record<string, unknown>;
}

export function newResult(id: string, title: string, method: string[], metrics: MetricDef[]): ScenarioResult {
  return { id, title, method, metrics, rows: [], paired: [], warmups: [], errors: [], durationS: NaN };
}
