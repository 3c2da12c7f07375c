/**
 * runLoad: drives Generate calls at a target in a closed loop (fixed concurrency) or an open
 * loop (arrivals at a rate, Poisson or evenly spaced) until the count or the duration is
 * reached, then gives in-flight calls `graceS` to finish and cancels the rest (counted as
 * CANCELLED errors). Bounded: at most `count` requests, at most duration + grace (+ retries'
 * last attempts, which are cancelled at the same bound).
 *
 * Retries (opt-in): a RESOURCE_EXHAUSTED attempt is retried up to `retry` times. Every
 * attempt counts as sent and ends in completed/rejected/errors on its own, so the summary's
 * invariant sent = completed + rejected + errors holds; `retries` says how many were retries.
 */
import * as grpc from '@grpc/grpc-js';
import { setTimeout as sleep } from 'node:timers/promises';
import { GrpcStatus } from '../grpc/status.js';
import { mulberry32, type Random } from '../engine/prng.js';
import type { GenerateRequestMessage } from '../engine/proto.js';
import { vllmEngineService } from '../engine/proto.js';
import type { IntRange, LoadOptions } from './options.js';
import { resolveLoadOptions } from './options.js';
import { startAttempt, type RunningAttempt } from './attempt.js';
import { retryDelayMs } from './retry.js';
import { LoadRecorder, type LoadSummary } from './stats.js';

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
  onProgress?(progress: LoadProgress): void;
  /** Aborting stops at once: nothing new starts and in-flight calls are cancelled. */
  signal?: AbortSignal;
}

const VOCAB = 32_000;

function draw(range: IntRange, random: Random): number {
  return range.min + Math.floor(random() * (range.max - range.min + 1));
}

export async function runLoad(input: Partial<LoadOptions> & { target: string }, hooks: LoadHooks = {}): Promise<LoadSummary> {
  const options = resolveLoadOptions(input);
  const random = mulberry32(options.seed);
  const recorder = new LoadRecorder();
  const Client = vllmEngineService();
  const client = new Client(options.target, grpc.credentials.createInsecure());
  const inFlight = new Set<RunningAttempt>();
  const hardStop = new AbortController();
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
  const durationTimer = options.durationS === undefined ? undefined : setTimeout(softStop, options.durationS * 1000);

  /** Takes the next request index, or undefined when the run must not start another. */
  const nextIndex = (): number | undefined => {
    if (softStopped) return undefined;
    if (options.count !== undefined && issued >= options.count) {
      softStop();
      return undefined;
    }
    return issued++;
  };

  const buildRequest = (index: number): GenerateRequestMessage => {
    const promptLength = draw(options.promptTokens, random);
    const inputIds = Array.from({ length: promptLength }, () => 1 + Math.floor(random() * (VOCAB - 1)));
    return {
      request_id: `load-${options.seed}-${index}`,
      tokenized: { original_text: '', input_ids: inputIds },
      sampling_params: { max_tokens: draw(options.maxTokens, random), n: 1 },
      stream: options.stream,
    };
  };

  const runRequest = async (index: number): Promise<void> => {
    const request = buildRequest(index);
    for (let attempt = 0; ; attempt++) {
      recorder.attemptStarted(attempt > 0);
      const running = startAttempt(client, request, options.deadlineMs, recorder);
      inFlight.add(running);
      const result = await running.done;
      inFlight.delete(running);
      recorder.attemptEnded(result.outcome);
      const rejected = result.outcome.kind === 'failed' && result.outcome.code === GrpcStatus.RESOURCE_EXHAUSTED;
      if (!rejected || attempt >= options.retry || hardStop.signal.aborted) return;
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
    for (let index = nextIndex(); index !== undefined; index = nextIndex()) {
      const request = runRequest(index).finally(() => requests.delete(request));
      requests.add(request);
      const gap = options.arrival === 'fixed' ? 1 / rate : -Math.log(1 - random()) / rate;
      due += gap * 1000;
      const wait = due - performance.now();
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
  const progressTimer = hooks.onProgress
    ? setInterval(() => {
        const now = performance.now();
        const elapsedS = (now - startedAt) / 1000;
        hooks.onProgress!({
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
    else await closedLoop(options.concurrency ?? 1);
  } finally {
    clearTimeout(durationTimer);
    clearTimeout(graceTimer);
    clearInterval(progressTimer);
    hooks.signal?.removeEventListener('abort', onAbort);
    client.close();
  }
  return recorder.summary(options.target, performance.now() - startedAt);
}
