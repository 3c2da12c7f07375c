/**
 * runLoad: drives requests at a target (gRPC Generate, or OpenAI-compatible HTTP with
 * `openai`; see transport.ts) in a closed loop (fixed concurrency) or an open
 * loop (arrivals at a rate, Poisson or evenly spaced) until the count or the duration is
 * reached, then gives in-flight calls `graceS` to finish and cancels the rest (counted as
 * CANCELLED errors). Bounded: at most `count` requests, at most duration + grace (+ retries'
 * last attempts, which are cancelled at the same bound).
 *
 * The duration is read off the clock, not off a timer's callback: a timer that fires late (a
 * busy machine) must not let more requests start. The closed loop starts none once the duration
 * has passed; the open loop issues exactly the arrivals its schedule puts before the end of the
 * duration (those it is late for are issued at once, catching up, and none after).
 *
 * Retries (opt-in): a rejected attempt (RESOURCE_EXHAUSTED, or an HTTP overload status) is
 * retried up to `retry` times, after the server's pushback or a jittered backoff. Every
 * attempt counts as sent and ends in completed/rejected/errors on its own, so the summary's
 * invariant sent = completed + rejected + errors holds; `retries` says how many were retries.
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { mulberry32 } from '../../platform/prng.js';
import type { LoadOptions } from './options.js';
import { DEFAULT_CONCURRENCY, resolveLoadOptions } from './options.js';
import type { RunningAttempt } from './attempt.js';
import { openAiTransport } from './openai-transport.js';
import { retryDelayMs } from './retry.js';
import { isRejection, LoadRecorder, type LoadSummary } from './stats.js';
import { grpcTransport } from './transport.js';

export interface LoadProgress {
  elapsed_s: number;
  sent: number;
  completed: number;
  rejected: number;
  errors: number;
  in_flight: number;
  /** Output tokens per second since the previous progress report. */
  tokens_per_s: number;
  /** How far the run is towards its stop condition (duration or count, whichever is nearer), 0..1. */
  fraction: number;
}

export interface LoadHooks {
  /** Undefined: no progress reports (--quiet). */
  onProgress?: ((progress: LoadProgress) => void) | undefined;
  /** Aborting stops at once: nothing new starts and in-flight calls are cancelled. */
  signal?: AbortSignal;
}

/**
 * Runs the load and returns its summary. Throws ConfigError for invalid options and, with
 * `openai` and no `model`, LoadSetupError when the server names no model.
 */
export async function runLoad(input: Partial<LoadOptions>, hooks: LoadHooks = {}): Promise<LoadSummary> {
  const options = resolveLoadOptions(input);
  const random = mulberry32(options.seed);
  const slo = options.sloTtftMs === undefined && options.sloItlMs === undefined ? undefined : { ttftMs: options.sloTtftMs, itlMs: options.sloItlMs };
  const recorder = new LoadRecorder({ httpStatuses: options.openai !== undefined, slo });
  const transport = options.openai !== undefined ? await openAiTransport(options, random, recorder, hooks.signal) : grpcTransport(options, random, recorder);
  const inFlight = new Set<RunningAttempt>();
  const hardStop = new AbortController();
  // One listener per request backing off before a retry: bounded by the concurrency, not a leak.
  setMaxListeners(0, hardStop.signal);
  const startedAt = performance.now();
  let issued = 0;
  let softStopped = false;
  let graceTimer: NodeJS.Timeout | undefined;
  // Aborted at the stop condition to cut the open loop's wait for its next arrival short.
  const wakeArrivals = new AbortController();

  const softStop = (): void => {
    if (softStopped) return;
    softStopped = true;
    wakeArrivals.abort();
    graceTimer = setTimeout(stopNow, options.graceS * 1000);
  };
  const stopNow = (): void => {
    softStopped = true;
    wakeArrivals.abort();
    hardStop.abort();
    for (const attempt of inFlight) attempt.cancel();
  };
  const onAbort = (): void => stopNow();
  hooks.signal?.addEventListener('abort', onAbort, { once: true });
  if (hooks.signal?.aborted) stopNow();
  const endsAt = options.durationS === undefined ? Infinity : startedAt + options.durationS * 1000;
  // The open loop stops itself at the end of its schedule (below); the timer starts the closed
  // loop's grace at the duration even while every worker waits on a call.
  const durationTimer = options.durationS === undefined || options.rate !== undefined ? undefined : setTimeout(softStop, options.durationS * 1000);

  /**
   * Takes the next request index, or undefined when the run must not start another. `at`: when
   * the request is due (the open loop's schedule; now for the closed loop).
   */
  const nextIndex = (at: number = performance.now()): number | undefined => {
    if (softStopped) return undefined;
    if (at >= endsAt) {
      softStop();
      return undefined;
    }
    if (options.count !== undefined && issued >= options.count) {
      softStop();
      return undefined;
    }
    return issued++;
  };

  const runRequest = async (index: number): Promise<void> => {
    const start = transport.prepare(index);
    for (let attempt = 0; ; attempt++) {
      recorder.attemptStarted(attempt > 0);
      const sentAt = performance.now();
      const running = start();
      inFlight.add(running);
      const result = await running.done;
      inFlight.delete(running);
      recorder.attemptEnded(result.outcome, performance.now() - sentAt);
      if (!isRejection(result.outcome) || attempt >= options.retry || hardStop.signal.aborted) return;
      const delay = retryDelayMs(attempt, result.pushback, options.retryBaseMs, options.retryMaxMs, random);
      if (delay === undefined) return;
      try {
        await sleep(delay, undefined, { signal: hardStop.signal });
      } catch {
        return; // stopped while backing off: the request ends as rejected
      }
    }
  };

  const closedLoop = async (concurrency: number): Promise<void> => {
    const worker = async (): Promise<void> => {
      for (let index = nextIndex(); index !== undefined; index = nextIndex()) await runRequest(index);
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  };

  const openLoop = async (rate: number): Promise<void> => {
    const requests = new Set<Promise<void>>();
    let due = performance.now();
    for (let index = nextIndex(due); index !== undefined; index = nextIndex(due)) {
      const request = runRequest(index).finally(() => requests.delete(request));
      requests.add(request);
      const gap = options.arrival === 'fixed' ? 1 / rate : -Math.log(1 - random()) / rate;
      due += gap * 1000;
      // Past the end of the duration: wait for the end itself, where nextIndex stops the run.
      const wait = Math.min(due, endsAt) - performance.now();
      if (wait > 0) {
        try {
          await sleep(wait, undefined, { signal: wakeArrivals.signal });
        } catch {
          break;
        }
      }
    }
    await Promise.all(requests);
  };

  let lastTokens = 0;
  let lastReportAt = startedAt;
  const { onProgress } = hooks;
  const progressTimer = onProgress
    ? setInterval(() => {
        const now = performance.now();
        const elapsedS = (now - startedAt) / 1000;
        onProgress({
          fraction: Math.min(1, Math.max(options.durationS ? elapsedS / options.durationS : 0, options.count ? issued / options.count : 0)),
          elapsed_s: elapsedS,
          sent: recorder.sent,
          completed: recorder.completed,
          rejected: recorder.rejected,
          errors: recorder.errorCount,
          in_flight: recorder.inFlight,
          tokens_per_s: ((recorder.outputTokens - lastTokens) * 1000) / Math.max(1, now - lastReportAt),
        });
        lastTokens = recorder.outputTokens;
        lastReportAt = now;
      }, options.progressIntervalMs)
    : undefined;

  try {
    if (options.rate !== undefined) await openLoop(options.rate);
    else await closedLoop(options.concurrency ?? DEFAULT_CONCURRENCY);
  } finally {
    clearTimeout(durationTimer);
    clearTimeout(graceTimer);
    clearInterval(progressTimer);
    hooks.signal?.removeEventListener('abort', onAbort);
    transport.close();
  }
  const summary = recorder.summary(transport.target, performance.now() - startedAt);
  if (transport.describe === undefined) return summary;
  const { target, ...rest } = summary;
  return { target, ...transport.describe, ...rest };
}
