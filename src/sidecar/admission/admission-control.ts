/**
 * The admission settings in force (engine request limit N, queue limit Q, queue timeout, retry
 * pushback) and the one way to change them while the sidecar runs, whoever asks: the admin API
 * (`PUT /admission`) or SIGHUP (the config file). The last change wins.
 *
 *   control.change({ engineRequestLimit: 4 }, 'api')   // -> { changed: ['engineRequestLimit'] } or { problem }
 *
 * A change goes to the gate at once (AdmissionGate.setLimits: its rules for raising and lowering),
 * to the retry pushback, and to the load events (published at once, like on a rejection); it is
 * logged with each old and new value and its source, and counted.
 */
import type { Logger } from '../../platform/log.js';
import { LIVE_SETTINGS, pushbackBoundsProblem, type AdmissionSettings, type LiveSettingKey } from '../config/sidecar-config.js';
import type { AdmissionGate } from './gate.js';
import { GradientLimit } from './gradient-limit.js';
import type { CallClass } from './waiting-room.js';
import type { RetryPushback } from './retry-pushback.js';

/** Who changed the settings: the admin API, SIGHUP (the config file), or the engine's capacity (--engine-request-limit auto). */
export type ChangeSource = 'api' | 'sighup' | 'engine';
export const CHANGE_SOURCES: readonly ChangeSource[] = ['api', 'sighup', 'engine'];

/** The settings' names on the wire (admin API JSON and log lines), as in the load events and flags. */
export const ADMISSION_FIELDS = {
  engineRequestLimit: 'engine_request_limit',
  requestQueueLimit: 'request_queue_limit',
  queueTimeoutMs: 'request_queue_timeout_ms',
  admissionMode: 'admission_mode',
  adaptiveMinLimit: 'adaptive_min_limit',
  firstTokenLimit: 'first_token_limit',
  maxQueueWaitMs: 'max_queue_wait_ms',
  retryPushbackMode: 'retry_pushback_mode',
  retryPushbackMs: 'retry_pushback_ms',
  retryPushbackMinMs: 'retry_pushback_min_ms',
  retryPushbackMaxMs: 'retry_pushback_max_ms',
} as const satisfies Record<LiveSettingKey, string>;

const LIVE_KEYS = Object.keys(LIVE_SETTINGS) as LiveSettingKey[];

/** The settings as JSON: field names of ADMISSION_FIELDS, admission off as `engine_request_limit: null`. */
export function settingsJson(settings: AdmissionSettings): Record<string, number | string | null> {
  const json: Record<string, number | string | null> = {};
  for (const key of LIVE_KEYS) json[ADMISSION_FIELDS[key]] = settings[key] ?? null;
  return json;
}

/** The gate's N, Q and F for these settings: admission off is an unbounded N, no queue and no first-token limit. */
export function gateLimits(settings: Pick<AdmissionSettings, 'engineRequestLimit' | 'requestQueueLimit' | 'firstTokenLimit'>): {
  limit: number;
  queueLimit: number;
  firstTokenLimit: number;
} {
  return settings.engineRequestLimit === undefined
    ? { limit: Infinity, queueLimit: 0, firstTokenLimit: Infinity }
    : { limit: settings.engineRequestLimit, queueLimit: settings.requestQueueLimit, firstTokenLimit: settings.firstTokenLimit ?? Infinity };
}

export interface AdmissionControlDeps {
  readonly gate: AdmissionGate;
  /** At start-up, from the parsed config. */
  readonly settings: AdmissionSettings;
  readonly metrics: { admissionChanged(source: ChangeSource): void };
  /** After every change, once the gate has it: the load events go out now. */
  readonly onChange: () => void;
  readonly logger: Logger;
  /** Built first by the composition root: the metrics read its estimate too. Reconfigured on every change. */
  readonly pushback: RetryPushback;
  /** --engine-request-limit auto: the engine's capacity may set N (engineReported). */
  readonly limitFromEngine?: boolean;
}

export interface LastChange {
  readonly source: ChangeSource | 'startup';
  /** Unix ms. */
  readonly at: number;
}

export class AdmissionControl {
  readonly pushback: RetryPushback;
  private current: AdmissionSettings;
  private last: LastChange = { source: 'startup', at: Date.now() };
  /** Adaptive mode with a limit set: what moves N between the floor and the configured limit. */
  private gradient: GradientLimit | undefined;
  /** N is the engine's to set: auto, and no operator has set it since start. */
  private limitFromEngine: boolean;

  constructor(private readonly deps: AdmissionControlDeps) {
    this.current = deps.settings;
    this.limitFromEngine = deps.limitFromEngine ?? false;
    this.pushback = deps.pushback;
    this.gradient = gradientFor(deps.settings, undefined);
    if (this.gradient) this.applyToGate();
  }

  /** The engine request limit in force: the configured one, or adaptive mode's (undefined: admission off). */
  get limitInForce(): number | undefined {
    return this.gradient?.limit ?? this.current.engineRequestLimit;
  }

  /** A call's first token came `afterMs` after its slot: the estimates learn it, and adaptive mode may move N. */
  firstTokenAfter(afterMs: number): void {
    this.pushback.firstTokenAfter(afterMs);
    if (this.gradient?.sample(afterMs)) this.applyToGate();
  }

  private applyToGate(): void {
    const { limit, queueLimit, firstTokenLimit } = gateLimits(this.current);
    this.deps.gate.setLimits(this.gradient?.limit ?? limit, queueLimit, firstTokenLimit);
  }

  get settings(): AdmissionSettings {
    return this.current;
  }

  get lastChange(): LastChange {
    return this.last;
  }

  /** The queue timeout a call queued now gets (0: none). */
  get queueTimeoutMs(): number {
    return this.current.queueTimeoutMs;
  }

  /**
   * For a call (of `callClass`, when given) that would have to queue now (no room in the engine): its expected wait in ms when
   * that is too long to queue for, i.e. beyond --max-queue-wait-ms or the time the call's own
   * deadline leaves; `undefined` when it may queue (the setting is off, or the wait fits). The
   * proxy then refuses it at once with this wait as its pushback.
   *
   * Without an estimate yet (no call has ended since start, so the time a slot takes is unknown)
   * the call is refused too, with the pushback's stand-in: a queued call waits for a running one
   * to finish, a whole generation, and the sweep saw exactly those calls, queued in a fresh
   * sidecar's first second under overload, as its only TTFTs near a second.
   */
  queueRefusalMs(deadlineLeftMs: number | undefined, callClass?: CallClass): number | undefined {
    const max = this.current.maxQueueWaitMs;
    if (max === 0) return undefined;
    // A call waits only behind the calls the queue's order puts ahead of it.
    const wait = this.pushback.expectedWaitMs(callClass === undefined ? undefined : this.deps.gate.queuedAhead(callClass));
    if (wait === undefined) return Math.max(1, Math.round(this.pushback.estimateMs()));
    return wait > max || (deadlineLeftMs !== undefined && wait > deadlineLeftMs) ? Math.max(1, Math.round(wait)) : undefined;
  }

  /**
   * Of the queue's free places, how many a call would be let into right now, one after another,
   * once the free slots are taken: each must expect a wait within --max-queue-wait-ms (the load
   * events' admit_now, admit-now.ts). All of them with the setting off; none before a wait is known
   * (queueRefusalMs refuses then too).
   */
  queuePlacesWithinWait(): number {
    const { gate } = this.deps;
    const free = Math.max(0, gate.queueLimit - gate.queued);
    const max = this.current.maxQueueWaitMs;
    if (max === 0) return free;
    let places = 0;
    while (places < free) {
      const wait = this.pushback.expectedWaitMs(gate.queued + places, true);
      if (wait === undefined || wait > max) break;
      places++;
    }
    return places;
  }

  /**
   * The retry pushback (ms) to send with one refusal: the configured value in fixed mode, a fresh
   * estimate in adaptive mode. A decision, not a wire answer: the proxy builds (and caches) the
   * RESOURCE_EXHAUSTED headers around it.
   */
  retryPushbackMs(): number {
    return this.current.retryPushbackMode === 'fixed' ? this.current.retryPushbackMs : this.pushback.nextMs();
  }

  /**
   * --engine-request-limit auto: the engine told its capacity, which gives N (the ceiling in
   * adaptive mode). Applied as a change from source `engine`, unless an operator has set N since
   * start (the admin API or SIGHUP): the last word is theirs. Returns whether N is now `limit`.
   */
  engineReported(limit: number): boolean {
    if (!this.limitFromEngine) return false;
    const outcome = this.change({ engineRequestLimit: limit }, 'engine');
    return 'changed' in outcome && this.current.engineRequestLimit === limit;
  }

  /**
   * Applies `change` on top of the settings in force. Each value must already be in its range
   * (the callers parse it); what spans two settings is checked here, and a change that breaks it
   * is refused whole. Returns the keys that actually changed (none: nothing logged or counted).
   */
  change(change: Partial<AdmissionSettings>, source: ChangeSource): { changed: LiveSettingKey[] } | { problem: string } {
    const next = Object.freeze({ ...this.current, ...change }) as AdmissionSettings;
    const problem = pushbackBoundsProblem(next);
    if (problem) return { problem };
    const changed = LIVE_KEYS.filter((key) => next[key] !== this.current[key]);
    if (changed.length === 0) return { changed };
    const before = this.current;
    this.current = next;
    if (source !== 'engine' && changed.includes('engineRequestLimit')) this.limitFromEngine = false;
    this.last = { source, at: Date.now() };
    this.pushback.configure(next);
    this.gradient = gradientFor(next, this.gradient);
    const { gate } = this.deps;
    const inEngine = gate.inEngine;
    const queued = gate.queued;
    this.applyToGate();
    this.deps.metrics.admissionChanged(source);
    const fields: Record<string, unknown> = { source };
    for (const key of changed) fields[ADMISSION_FIELDS[key]] = `${String(before[key] ?? null)} -> ${String(next[key] ?? null)}`;
    this.deps.logger.info('admission changed', { ...fields, engine_request: inEngine, request_queue: queued });
    this.deps.onChange();
    return { changed };
  }
}

/** Adaptive mode's controller for `settings`, keeping `existing`'s estimate within the new bounds; undefined in static mode or with admission off. */
function gradientFor(settings: AdmissionSettings, existing: GradientLimit | undefined): GradientLimit | undefined {
  const ceiling = settings.engineRequestLimit;
  if (settings.admissionMode !== 'adaptive' || ceiling === undefined) return undefined;
  const floor = Math.min(settings.adaptiveMinLimit, ceiling);
  if (!existing) return new GradientLimit({ floor, ceiling });
  existing.setBounds(floor, ceiling);
  return existing;
}
