// runLoad, the driver, with a fake transport whose attempts the test ends, under fake timers
// (node:timers/promises' setTimeout is rebuilt on the faked global one): closed and open loops,
// count and duration stops, the grace and its cancels, abort, retries with pushback or backoff,
// progress reports, and the summary's target. Against real servers: test/integration/tools/load/.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import type { AttemptResult, RunningAttempt } from '../../../../src/tools/load/attempt.js';
import type { LoadOptions } from '../../../../src/tools/load/options.js';
import { runLoad, type LoadHooks, type LoadProgress } from '../../../../src/tools/load/run.js';
import type { AttemptOutcome, LoadRecorder, LoadSummary } from '../../../../src/tools/load/stats.js';
import { LoadSetupError, type LoadTransport } from '../../../../src/tools/load/transport.js';

vi.mock('node:timers/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:timers/promises')>();
  const setTimeout = <T>(ms: number, value?: T, options: { signal?: AbortSignal } = {}): Promise<T | undefined> =>
    new Promise((resolve, reject) => {
      const { signal } = options;
      const aborted = (): Error => Object.assign(new Error('The operation was aborted'), { name: 'AbortError' });
      if (signal?.aborted) return reject(aborted());
      const onAbort = (): void => {
        globalThis.clearTimeout(timer);
        reject(aborted());
      };
      const timer = globalThis.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve(value);
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  return { ...actual, setTimeout };
});

const fake = vi.hoisted(() => ({
  transport: undefined as LoadTransport | undefined,
  setupError: undefined as Error | undefined,
  grpcOptions: [] as unknown[],
  recorder: undefined as LoadRecorder | undefined,
}));

vi.mock('../../../../src/tools/load/transport.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../../../src/tools/load/transport.js')>()),
  grpcTransport: (options: unknown, _random: unknown, recorder: LoadRecorder) => {
    fake.grpcOptions.push(options);
    fake.recorder = recorder;
    return fake.transport;
  },
}));

vi.mock('../../../../src/tools/load/openai-transport.js', () => ({
  openAiTransport: () => (fake.setupError ? Promise.reject(fake.setupError) : Promise.resolve(fake.transport)),
}));

interface FakeAttempt {
  readonly index: number;
  /** 0 for the first attempt of a request, 1 for its first retry, ... */
  readonly retry: number;
  readonly startedAt: number;
  cancelled: boolean;
  end(outcome: AttemptOutcome, pushback?: number | 'stop'): void;
}

const CANCELLED: AttemptOutcome = { kind: 'failed', code: GrpcStatus.CANCELLED };
const COMPLETED: AttemptOutcome = { kind: 'completed' };
const REJECTED: AttemptOutcome = { kind: 'failed', code: GrpcStatus.RESOURCE_EXHAUSTED };

/** A transport whose attempts `answer` ends (now, later with a fake timer, or never); a cancel ends one as CANCELLED. */
class FakeTransport implements LoadTransport {
  readonly target = 'fake:1';
  describe?: { model: string; api: string };
  readonly prepared: number[] = [];
  readonly attempts: FakeAttempt[] = [];
  closed = 0;
  inFlight = 0;
  maxInFlight = 0;

  constructor(private readonly answer: (attempt: FakeAttempt) => void = (a) => a.end(COMPLETED)) {}

  prepare(index: number): () => RunningAttempt {
    this.prepared.push(index);
    let retry = 0;
    return () => {
      let settle!: (result: AttemptResult) => void;
      const done = new Promise<AttemptResult>((resolve) => (settle = resolve));
      let ended = false;
      const attempt: FakeAttempt = {
        index,
        retry: retry++,
        startedAt: performance.now(),
        cancelled: false,
        end: (outcome, pushback) => {
          if (ended) return;
          ended = true;
          this.inFlight -= 1;
          settle({ outcome, pushback });
        },
      };
      this.attempts.push(attempt);
      this.inFlight += 1;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      this.answer(attempt);
      return {
        done,
        cancel: () => {
          attempt.cancelled = true;
          attempt.end(CANCELLED);
        },
      };
    };
  }

  close(): void {
    this.closed += 1;
  }
}

const after =
  (ms: number, outcome: AttemptOutcome = COMPLETED) =>
  (a: FakeAttempt) =>
    void globalThis.setTimeout(() => a.end(outcome), ms);
const hold = () => {};

function use(transport: FakeTransport): FakeTransport {
  fake.transport = transport;
  return transport;
}

/** Runs the load, advancing fake time in steps until it returns (bounded). */
async function run(input: Partial<LoadOptions>, hooks: LoadHooks = {}, stepMs = 10): Promise<{ summary: LoadSummary; at: number }> {
  let result: LoadSummary | undefined;
  let failure: Error | undefined;
  let at = Number.NaN;
  const running = runLoad({ target: '127.0.0.1:1', ...input }, hooks).then(
    (s) => {
      result = s;
      at = performance.now();
    },
    (err: unknown) => (failure = err instanceof Error ? err : new Error('runLoad rejected', { cause: err })),
  );
  for (let i = 0; i < 100_000 && result === undefined && failure === undefined; i++) await vi.advanceTimersByTimeAsync(stepMs);
  await running;
  if (failure !== undefined) throw failure;
  if (result === undefined) throw new Error('runLoad did not return');
  return { summary: result, at };
}

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
  fake.transport = undefined;
  fake.setupError = undefined;
  fake.grpcOptions.length = 0;
  fake.recorder = undefined;
});

afterEach(() => {
  vi.useRealTimers();
});

describe('runLoad closed loop', () => {
  it('sends exactly --count requests, each prepared once, at most --concurrency at a time', async () => {
    const t = use(new FakeTransport(after(50)));
    const { summary } = await run({ count: 7, concurrency: 3 });
    expect(summary).toMatchObject({ target: 'fake:1', sent: 7, completed: 7, rejected: 0, errors: {}, retries: 0 });
    expect([...t.prepared].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(t.maxInFlight).toBe(3);
    expect(t.closed).toBe(1);
  });

  it('starts the next request as soon as one ends, and returns when the last ends, leaving no timer', async () => {
    const t = use(new FakeTransport(after(100)));
    const { at } = await run({ count: 4, concurrency: 2 });
    expect(t.attempts.map((a) => a.startedAt)).toEqual([0, 0, 100, 100]);
    expect(at).toBe(200);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops starting requests at the duration and lets the one in flight finish within the grace', async () => {
    const t = use(new FakeTransport(after(300)));
    const { summary, at } = await run({ durationS: 1, concurrency: 1, graceS: 5 });
    expect(t.attempts.map((a) => a.startedAt)).toEqual([0, 300, 600, 900]);
    expect(summary).toMatchObject({ sent: 4, completed: 4, errors: {} });
    expect(at).toBe(1200);
  });

  it('cancels what is still in flight when the grace ends, counting it as CANCELLED', async () => {
    const t = use(new FakeTransport(hold));
    let returned = false;
    const running = runLoad({ target: '127.0.0.1:1', durationS: 1, graceS: 2, concurrency: 3 }).then((s) => {
      returned = true;
      return s;
    });
    await vi.advanceTimersByTimeAsync(2999);
    expect(returned).toBe(false);
    expect(t.attempts.some((a) => a.cancelled)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const summary = await running;
    expect(t.attempts.every((a) => a.cancelled)).toBe(true);
    expect(summary).toMatchObject({ sent: 3, completed: 0, errors: { CANCELLED: 3 } });
  });

  it('with a grace of 0 cancels at the stop condition itself', async () => {
    use(new FakeTransport(hold));
    const { summary, at } = await run({ durationS: 0.5, graceS: 0, concurrency: 2 });
    // The fake clock runs a 0 ms timer set while timers fire 1 ms later (as node's setTimeout(0) does).
    expect(at).toBeGreaterThanOrEqual(500);
    expect(at).toBeLessThanOrEqual(501);
    expect(summary.errors).toEqual({ CANCELLED: 2 });
  });

  it('defaults to one request at a time for 10 s', async () => {
    const t = use(new FakeTransport(after(1000)));
    const { summary } = await run({}, {}, 100);
    expect(t.maxInFlight).toBe(1);
    expect(summary.sent).toBe(10);
    expect(fake.grpcOptions[0]).toMatchObject({ concurrency: 1, durationS: 10 });
  });
});

describe('runLoad open loop', () => {
  it('starts arrivals at a fixed rate whatever is in flight', async () => {
    const t = use(new FakeTransport(hold));
    const abort = new AbortController();
    const running = runLoad({ target: '127.0.0.1:1', rate: 10, arrival: 'fixed', count: 5 }, { signal: abort.signal });
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.attempts.map((a) => a.startedAt)).toEqual([0, 100, 200, 300, 400]);
    abort.abort();
    expect((await running).errors).toEqual({ CANCELLED: 5 });
  });

  it('spreads Poisson arrivals unevenly around the rate, the same for the same seed', async () => {
    // Start times from the run's own start (the fake clock goes on from one run to the next).
    const starts = async (seed: number): Promise<number[]> => {
      const t = use(new FakeTransport());
      const from = performance.now();
      await run({ rate: 100, arrival: 'poisson', count: 50, seed }, {}, 1);
      return t.attempts.map((a) => a.startedAt - from);
    };
    const a = await starts(1);
    expect(a).toHaveLength(50);
    const gaps = a.slice(1).map((s, i) => s - a[i]!);
    expect(new Set(gaps).size).toBeGreaterThan(5);
    const mean = gaps.reduce((x, y) => x + y, 0) / gaps.length;
    expect(mean).toBeGreaterThan(3);
    expect(mean).toBeLessThan(30);
    expect(await starts(1)).toEqual(a);
  });

  it('stops arriving at the duration without waiting for the next arrival', async () => {
    const t = use(new FakeTransport(after(10)));
    const { summary, at } = await run({ rate: 1, arrival: 'fixed', durationS: 2.5 }, {}, 10);
    expect(t.attempts.map((a) => a.startedAt)).toEqual([0, 1000, 2000]);
    expect(summary.completed).toBe(3);
    expect(at).toBe(2500);
  });
});

describe('runLoad abort', () => {
  it('sends nothing when the signal is already aborted', async () => {
    const t = use(new FakeTransport());
    const abort = new AbortController();
    abort.abort();
    const { summary } = await run({ count: 5 }, { signal: abort.signal });
    expect(summary.sent).toBe(0);
    expect(t.attempts).toHaveLength(0);
    expect(t.closed).toBe(1);
  });

  it('cancels in-flight attempts at once and returns, without waiting for the grace', async () => {
    const t = use(new FakeTransport(hold));
    const abort = new AbortController();
    const running = runLoad({ target: '127.0.0.1:1', concurrency: 2, durationS: 60, graceS: 30 }, { signal: abort.signal });
    await vi.advanceTimersByTimeAsync(100);
    abort.abort();
    const summary = await running;
    expect(performance.now()).toBe(100);
    expect(t.attempts.every((a) => a.cancelled)).toBe(true);
    expect(summary).toMatchObject({ sent: 2, errors: { CANCELLED: 2 } });
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('runLoad retries', () => {
  it('retries a rejection after exactly the pushback, reusing the prepared request', async () => {
    const t = use(new FakeTransport((a) => (a.retry === 0 ? a.end(REJECTED, 500) : a.end(COMPLETED))));
    const { summary } = await run({ count: 1, retry: 3 }, {}, 1);
    expect(t.attempts.map((a) => [a.index, a.retry, a.startedAt])).toEqual([
      [0, 0, 0],
      [0, 1, 500],
    ]);
    expect(t.prepared).toEqual([0]);
    expect(summary).toMatchObject({ sent: 2, retries: 1, rejected: 1, completed: 1 });
  });

  it('gives up after --retry retries, counting each attempt', async () => {
    const t = use(new FakeTransport((a) => a.end(REJECTED, 0)));
    const { summary } = await run({ count: 2, retry: 3 });
    expect(t.attempts).toHaveLength(8);
    expect(summary).toMatchObject({ sent: 8, retries: 6, rejected: 8, completed: 0 });
  });

  it('never retries without --retry, after a stop pushback, or after another failure', async () => {
    use(new FakeTransport((a) => a.end(REJECTED, 0)));
    expect((await run({ count: 1 })).summary.sent).toBe(1);
    use(new FakeTransport((a) => a.end(REJECTED, 'stop')));
    expect((await run({ count: 1, retry: 5 })).summary.sent).toBe(1);
    use(new FakeTransport((a) => a.end({ kind: 'failed', code: GrpcStatus.UNAVAILABLE })));
    expect((await run({ count: 1, retry: 5 })).summary).toMatchObject({ sent: 1, errors: { UNAVAILABLE: 1 } });
    use(new FakeTransport((a) => a.end({ kind: 'error', label: 'HTTP_503' })));
    expect((await run({ count: 1, retry: 5 })).summary.sent).toBe(1);
  });

  it('retries an HTTP overload rejection too', async () => {
    const t = use(new FakeTransport((a) => a.end(a.retry === 0 ? { kind: 'rejected' } : COMPLETED, 0)));
    await run({ count: 1, retry: 1 });
    expect(t.attempts).toHaveLength(2);
  });

  it('without pushback backs off exponentially with jitter, from retryBaseMs', async () => {
    const t = use(new FakeTransport((a) => a.end(REJECTED)));
    await run({ count: 1, retry: 3, retryBaseMs: 100, retryMaxMs: 5000 }, {}, 1);
    const starts = t.attempts.map((a) => a.startedAt);
    const gaps = starts.slice(1).map((s, i) => s - starts[i]!);
    // Uniform in [d/2, d) for d = 100, 200, 400 (fake time moves in 1 ms steps).
    for (const [i, gap] of gaps.entries()) {
      const d = 100 * 2 ** i;
      expect(gap).toBeGreaterThanOrEqual(d / 2);
      expect(gap).toBeLessThanOrEqual(d);
    }
    expect(gaps).toHaveLength(3);
  });

  it('ends a request backing off when the run is stopped, as the rejection it was', async () => {
    const t = use(new FakeTransport((a) => a.end(REJECTED, 10_000)));
    const abort = new AbortController();
    const running = runLoad({ target: '127.0.0.1:1', count: 1, retry: 5 }, { signal: abort.signal });
    await vi.advanceTimersByTimeAsync(5000);
    abort.abort();
    const summary = await running;
    expect(t.attempts).toHaveLength(1);
    expect(summary).toMatchObject({ sent: 1, rejected: 1, errors: {} });
  });

  it('lets a backing-off request retry within the grace after a soft stop, and cancels it at the grace end', async () => {
    const t = use(new FakeTransport((a) => (a.retry === 0 ? a.end(REJECTED, 800) : undefined)));
    const { summary, at } = await run({ durationS: 0.5, graceS: 1, concurrency: 1, retry: 2 });
    expect(t.attempts.map((a) => a.startedAt)).toEqual([0, 800]);
    expect(at).toBe(1500);
    expect(summary).toMatchObject({ sent: 2, rejected: 1, errors: { CANCELLED: 1 } });
  });
});

describe('runLoad progress', () => {
  it('reports every progressIntervalMs with counts, tokens/s since the last report and how far the run is', async () => {
    // Each attempt takes 250 ms and brings 10 tokens; at a report's instant the report comes first.
    use(
      new FakeTransport((a) => {
        globalThis.setTimeout(() => {
          fake.recorder!.tokensReceived(10);
          a.end(COMPLETED);
        }, 250);
      }),
    );
    const reports: LoadProgress[] = [];
    await run({ durationS: 2, concurrency: 1, progressIntervalMs: 500 }, { onProgress: (p) => reports.push(p) });
    expect(reports.map((p) => p.elapsed_s)).toEqual([0.5, 1, 1.5, 2]);
    expect(reports.map((p) => p.fraction)).toEqual([0.25, 0.5, 0.75, 1]);
    expect(reports[1]).toMatchObject({ sent: 4, completed: 3, rejected: 0, errors: 0, in_flight: 1 });
    // 10 tokens in the first 500 ms, then 20 in each next 500 ms: a rate since the last report, not since the start.
    expect(reports.map((p) => p.tokens_per_s)).toEqual([20, 40, 40, 40]);
  });

  it('measures the fraction by the count when it is nearer than the duration', async () => {
    use(new FakeTransport(after(100)));
    const reports: LoadProgress[] = [];
    await run({ count: 10, durationS: 100, concurrency: 1, progressIntervalMs: 500 }, { onProgress: (p) => reports.push(p) });
    // Five requests issued by 500 ms (the sixth starts then too) of 10: at least half way.
    expect(reports[0]!.fraction).toBeGreaterThanOrEqual(0.5);
    expect(reports[0]!.fraction).toBeLessThanOrEqual(0.6);
  });

  it('sets no progress timer without onProgress', async () => {
    use(new FakeTransport(hold));
    const abort = new AbortController();
    const running = runLoad({ target: '127.0.0.1:1', durationS: 1 }, { signal: abort.signal });
    await vi.advanceTimersByTimeAsync(0);
    expect(vi.getTimerCount()).toBe(1); // the duration alone
    abort.abort();
    await running;
  });
});

describe('runLoad setup and summary', () => {
  it('refuses invalid options with a ConfigError before building a transport', async () => {
    await expect(runLoad({ target: '127.0.0.1:1', concurrency: 0 })).rejects.toBeInstanceOf(ConfigError);
    await expect(runLoad({})).rejects.toThrow(/--target: is required/);
    expect(fake.grpcOptions).toHaveLength(0);
  });

  it('passes the setup error of the --openai transport on', async () => {
    fake.setupError = new LoadSetupError('no models');
    await expect(runLoad({ openai: 'http://127.0.0.1:8000' })).rejects.toBeInstanceOf(LoadSetupError);
  });

  it('in --openai mode puts model and api after the target and counts HTTP statuses', async () => {
    const t = new FakeTransport();
    t.describe = { model: 'qwen', api: 'chat' };
    use(t);
    const { summary } = await run({ target: undefined, openai: 'http://127.0.0.1:8000', count: 2 });
    expect(Object.keys(summary).slice(0, 4)).toEqual(['target', 'model', 'api', 'sent']);
    expect(summary).toMatchObject({ target: 'fake:1', model: 'qwen', api: 'chat', sent: 2, statuses: {} });
    expect(fake.grpcOptions).toHaveLength(0);
  });

  it('in gRPC mode has no model, api or statuses', async () => {
    use(new FakeTransport());
    const { summary } = await run({ count: 1 });
    expect(summary).not.toHaveProperty('model');
    expect(summary).not.toHaveProperty('statuses');
  });

  it('measures the duration from start to return', async () => {
    use(new FakeTransport(after(1234)));
    const { summary } = await run({ count: 1 }, {}, 1);
    expect(summary.duration_s).toBe(1.234);
  });
});
