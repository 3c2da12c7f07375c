/**
 * Priority classes: a per-class scale of every busy threshold, so that low-priority requests
 * see workers busy sooner than high-priority ones (priority: an int32, lower runs sooner, as in
 * vLLM). A list such as `1=0.8,5=0.5` makes three classes:
 *
 *   priority < 1        -> "default", scale 1 (today's thresholds)
 *   1 <= priority < 5   -> "1", scale 0.8
 *   priority >= 5       -> "5", scale 0.5
 *
 * A request's class is the largest configured key P <= its priority; below every key (or with no
 * list) it is the scale-1 class. Each threshold the router checks is multiplied by the class's
 * scale before the busy rules run, so with a scale below 1 a worker counts as busy for that class
 * earlier, and with one above 1 later. The class key is also the metrics label (bounded by the
 * list: at most MAX_PRIORITY_CLASSES keys).
 */
import { checkPriority } from '../../protocol/request-class.js';
import type { PriorityScale, PriorityScales, Thresholds } from './contracts.js';

export const NO_PRIORITY_SCALES: PriorityScales = Object.freeze([]);

/** The label of the scale-1 class below every key. */
export const DEFAULT_CLASS_LABEL = 'default';

/** A scale must be in (0, MAX_SCALE]: 0 would make every worker busy, more than 10x is surely a typo. */
export const MAX_SCALE = 10;

/** Most keys one list may have (the class label's cardinality, per list). */
export const MAX_PRIORITY_CLASSES = 16;

export interface PriorityClass {
  /** The configured key as a decimal string, or DEFAULT_CLASS_LABEL. */
  readonly label: string;
  readonly scale: number;
}

const DEFAULT_CLASS: PriorityClass = Object.freeze({ label: DEFAULT_CLASS_LABEL, scale: 1 });

/** The class of `priority` under `scales`; undefined priority (none resolved) is the scale-1 class. */
export function priorityClassOf(scales: PriorityScales, priority: number | undefined): PriorityClass {
  if (priority === undefined) return DEFAULT_CLASS;
  let found: PriorityScale | undefined;
  for (const entry of scales) {
    if (entry.priority > priority) break;
    found = entry;
  }
  return found === undefined ? DEFAULT_CLASS : { label: String(found.priority), scale: found.scale };
}

/** Every set threshold times `scale` (off stays off); scale 1 returns `thresholds` itself. */
export function scaleThresholds(thresholds: Thresholds, scale: number): Thresholds {
  if (scale === 1) return thresholds;
  const times = (value: number | null): number | null => (value === null ? null : value * scale);
  return {
    active_decode_blocks_threshold: times(thresholds.active_decode_blocks_threshold),
    active_prefill_tokens_threshold: times(thresholds.active_prefill_tokens_threshold),
    active_prefill_tokens_threshold_frac: times(thresholds.active_prefill_tokens_threshold_frac),
  };
}

/** A scale in (0, MAX_SCALE], or a problem. */
export function checkScale(value: number): number | { problem: string } {
  if (!(Number.isFinite(value) && value > 0 && value <= MAX_SCALE)) return { problem: `scale must be a number > 0 and <= ${MAX_SCALE}, got ${value}` };
  return value;
}

/**
 * Builds the sorted, frozen list from (priority, scale) pairs already typed, checking each and
 * refusing a key given twice or more than MAX_PRIORITY_CLASSES keys.
 */
export function priorityScalesOf(pairs: readonly (readonly [priority: number, scale: number])[]): PriorityScales | { problem: string } {
  if (pairs.length > MAX_PRIORITY_CLASSES) return { problem: `at most ${MAX_PRIORITY_CLASSES} priority classes, got ${pairs.length}` };
  const entries: PriorityScale[] = [];
  for (const [priority, scale] of pairs) {
    const checkedPriority = checkPriority(priority);
    if (typeof checkedPriority !== 'number') return checkedPriority;
    const checkedScale = checkScale(scale);
    if (typeof checkedScale !== 'number') return { problem: `priority ${priority}: ${checkedScale.problem}` };
    if (entries.some((e) => e.priority === checkedPriority)) return { problem: `priority ${priority} is given twice` };
    entries.push(Object.freeze({ priority: checkedPriority, scale: checkedScale }));
  }
  return Object.freeze(entries.sort((a, b) => a.priority - b.priority));
}

/** The flag's form, `P=S,P=S` (spaces allowed; empty: no classes). */
export function parsePriorityScaleList(text: string): PriorityScales | { problem: string } {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  const pairs: [number, number][] = [];
  for (const item of items) {
    const match = /^([+-]?\d{1,10})\s*=\s*(\S+)$/u.exec(item);
    const scale = match ? Number(match[2]) : NaN;
    if (!match || !/^\d*\.?\d+(?:[eE][-+]?\d+)?$/u.test(match[2]!)) {
      return { problem: `expected a list of PRIORITY=SCALE (e.g. "1=0.8,5=0.5"), got ${JSON.stringify(item)}` };
    }
    pairs.push([Number(match[1]), scale]);
  }
  return priorityScalesOf(pairs);
}

/** The `/busy_threshold` wire form: keys are the priorities as decimal strings, in order. */
export function priorityScalesJson(scales: PriorityScales): Record<string, number> {
  return Object.fromEntries(scales.map((e) => [String(e.priority), e.scale]));
}
