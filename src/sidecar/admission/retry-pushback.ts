/**
 * The `grpc-retry-pushback-ms` a RESOURCE_EXHAUSTED answer carries (--retry-pushback-mode).
 *
 * - fixed: always --retry-pushback-ms, as before this existed.
 * - adaptive: the expected time until a slot frees for a newcomer. With `busy` calls in the
 *   engine (at least N), slots free at about busy / D per ms, D being the recent mean time a
 *   call holds a slot; a newcomer needs the calls above N to leave, then every queued call ahead
 *   of it, then one more:
 *
 *       estimate = (busy - N + queued + 1) x D / busy        (= (queued + 1) / N x D at the cap)
 *
 *   bounded by --retry-pushback-min-ms..--retry-pushback-max-ms, and each answer draws uniformly
 *   within +-25% of it (cut at the bounds), so clients turned away together come back spread
 *   out instead of in one wave. Until a call has held a slot, --retry-pushback-ms (bounded) stands
 *   in for the estimate.
 *
 * D is a time-decayed mean: each duration weighs exp(-age / 10 s), so it follows the engine over
 * seconds whatever the call rate, and costs one exp() per call that leaves the engine. Durations
 * are kept in fixed mode too, so a switch to adaptive has its estimate at once.
 *
 * The same estimate decides whether a call may queue at all (--max-queue-wait-ms,
 * expectedWaitMs): the wait for room behind N as above, or, when the first-token limit F is what
 * binds, behind the calls awaiting their first token, which leave that state at about
 * awaiting / T per ms (T the recent mean time from slot to first token):
 *
 *       wait = max((busy - N + queued + 1) x D / busy,  (awaiting - F + queued + 1) x T / awaiting)
 *
 * each term counted only when its limit binds.
 */
import type { Random } from '../../platform/prng.js';
import type { AdmissionSettings } from '../config/sidecar-config.js';

/** Each answer lies within this fraction of the estimate (then within the bounds). */
export const PUSHBACK_JITTER = 0.25;
/** A duration this old weighs 1/e of a fresh one. */
export const SLOT_TIME_DECAY_MS = 10_000;

type PushbackSettings = Pick<AdmissionSettings, 'retryPushbackMode' | 'retryPushbackMs' | 'retryPushbackMinMs' | 'retryPushbackMaxMs'>;

/** What the estimate reads of the gate. */
export interface PushbackGateView {
  readonly inEngine: number;
  readonly queued: number;
  /** N; `Infinity` with admission off. */
  readonly limit: number;
  readonly awaitingFirstToken: number;
  /** F; `Infinity` when off. */
  readonly firstTokenLimit: number;
}

/** A mean whose samples weigh exp(-age / SLOT_TIME_DECAY_MS). */
class DecayingMean {
  private weightedSum = 0;
  private weight = 0;
  private lastSampleAt = 0;

  add(value: number, now: number): void {
    const decay = this.weight === 0 ? 0 : Math.exp(-Math.max(0, now - this.lastSampleAt) / SLOT_TIME_DECAY_MS);
    this.weightedSum = this.weightedSum * decay + Math.max(0, value);
    this.weight = this.weight * decay + 1;
    this.lastSampleAt = now;
  }

  get value(): number | undefined {
    return this.weight === 0 ? undefined : this.weightedSum / this.weight;
  }
}

export class RetryPushback {
  private readonly slotTime = new DecayingMean();
  private readonly firstTokenTime = new DecayingMean();

  constructor(
    private settings: PushbackSettings,
    private readonly gate: PushbackGateView,
    /** Monotonic milliseconds. */
    private readonly now: () => number,
    private readonly random: Random,
  ) {}

  configure(settings: PushbackSettings): void {
    this.settings = settings;
  }

  /** A call held an engine slot for `ms` (from admission to release). */
  slotHeld(ms: number): void {
    this.slotTime.add(ms, this.now());
  }

  /** A call's first token came `ms` after it took its slot. */
  firstTokenAfter(ms: number): void {
    this.firstTokenTime.add(ms, this.now());
  }

  /** Recent mean time a call holds a slot, in ms; `undefined` before the first call ended. */
  get meanSlotMs(): number | undefined {
    return this.slotTime.value;
  }

  /** Recent mean time from slot to first token, in ms; `undefined` before the first one. */
  get meanFirstTokenMs(): number | undefined {
    return this.firstTokenTime.value;
  }

  /**
   * How long a call that joined the queue now would wait for room, in ms: 0 when there is room,
   * `undefined` while a limit binds whose time has not been observed yet. `queuedAhead`: the calls
   * it would wait behind (by default every queued call; fewer for an urgent one). `engineFull`:
   * as if the free slots were taken already (a call that queues behind the ones sent before it).
   */
  expectedWaitMs(queuedAhead?: number, engineFull = false): number | undefined {
    const { limit, awaitingFirstToken, firstTokenLimit } = this.gate;
    const inEngine = engineFull ? Math.max(this.gate.inEngine, limit) : this.gate.inEngine;
    const queued = queuedAhead ?? this.gate.queued;
    let wait = 0;
    if (inEngine >= limit) {
      const mean = this.meanSlotMs;
      if (mean === undefined) return undefined;
      wait = ((inEngine - limit + queued + 1) * mean) / inEngine;
    }
    if (awaitingFirstToken >= firstTokenLimit) {
      const mean = this.meanFirstTokenMs;
      if (mean === undefined) return undefined;
      wait = Math.max(wait, ((awaitingFirstToken - firstTokenLimit + queued + 1) * mean) / awaitingFirstToken);
    }
    return wait;
  }

  /**
   * How long a call arriving now would wait for its first token: the expected wait for room plus
   * the recent mean time from slot to first token; `undefined` until both are known. The load
   * events carry it (predicted_ttft_ms) so a frontend can route to the worker that answers soonest.
   */
  predictedTtftMs(): number | undefined {
    const wait = this.expectedWaitMs();
    const firstToken = this.meanFirstTokenMs;
    return wait === undefined || firstToken === undefined ? undefined : wait + firstToken;
  }

  /** What a rejection would carry now, before jitter (the gauge and GET /admission show it). */
  estimateMs(): number {
    const { retryPushbackMode, retryPushbackMs, retryPushbackMinMs: min, retryPushbackMaxMs: max } = this.settings;
    if (retryPushbackMode === 'fixed') return retryPushbackMs;
    const mean = this.meanSlotMs;
    const { inEngine, queued, limit } = this.gate;
    if (mean === undefined || limit === Infinity) return clamp(retryPushbackMs, min, max);
    const busy = Math.max(inEngine, limit);
    return clamp(((busy - limit + queued + 1) * mean) / busy, min, max);
  }

  /** The value for the next answer: fixed, or the estimate with its jitter, in whole ms. */
  nextMs(): number {
    const { retryPushbackMode, retryPushbackMinMs: min, retryPushbackMaxMs: max } = this.settings;
    const estimate = this.estimateMs();
    if (retryPushbackMode === 'fixed') return estimate;
    const low = Math.max(min, estimate * (1 - PUSHBACK_JITTER));
    const high = Math.min(max, estimate * (1 + PUSHBACK_JITTER));
    return Math.round(low + this.random() * (high - low));
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
