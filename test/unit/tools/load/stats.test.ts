// The load run's counts and latency summary: which outcome lands in which bucket, the
// nearest-rank percentiles (numeric order, rounding), rates and the duration they come from.
import { describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { isRejection, LoadRecorder, percentile, type AttemptOutcome } from '../../../../src/tools/load/stats.js';

function ended(recorder: LoadRecorder, ...outcomes: AttemptOutcome[]): void {
  for (const outcome of outcomes) {
    recorder.attemptStarted(false);
    recorder.attemptEnded(outcome);
  }
}

describe('isRejection', () => {
  it('is true for RESOURCE_EXHAUSTED and an HTTP overload status only: the outcomes --retry retries', () => {
    expect(isRejection({ kind: 'rejected' })).toBe(true);
    expect(isRejection({ kind: 'failed', code: GrpcStatus.RESOURCE_EXHAUSTED })).toBe(true);
    for (const code of [GrpcStatus.OK, GrpcStatus.UNAVAILABLE, GrpcStatus.CANCELLED, GrpcStatus.DEADLINE_EXCEEDED, GrpcStatus.ABORTED]) {
      expect(isRejection({ kind: 'failed', code }), GrpcStatus[code]).toBe(false);
    }
    expect(isRejection({ kind: 'completed' })).toBe(false);
    expect(isRejection({ kind: 'bad-response', label: 'NO_COMPLETE' })).toBe(false);
    // An HTTP error whose label happens to name the gRPC overload is still an error.
    expect(isRejection({ kind: 'error', label: 'RESOURCE_EXHAUSTED' })).toBe(false);
  });
});

describe('percentile', () => {
  it('takes rank ceil(q * n), clamped to the first and the last sample', () => {
    const sorted = [10, 20, 30, 40];
    expect(percentile(sorted, 0)).toBe(10);
    expect(percentile(sorted, 0.25)).toBe(10);
    expect(percentile(sorted, 0.26)).toBe(20);
    expect(percentile(sorted, 0.75)).toBe(30);
    expect(percentile(sorted, 1)).toBe(40);
    expect(percentile(sorted, 1.5)).toBe(40);
    expect(percentile(new Float64Array([1.5, 2.5]), 0.5)).toBe(1.5);
  });
});

describe('LoadRecorder latency percentiles', () => {
  it('sorts samples by value, not as text, and rounds to the microsecond', () => {
    const r = new LoadRecorder();
    // As strings, '100' < '9' < '95': a text sort would report p50 = 9 and p99 = 95.
    for (const ms of [95, 9, 100, 10.123456]) r.ttftSample(ms);
    for (const ms of [0.0004, 0.0006]) r.itlSample(ms);
    const s = r.summary('h:1', 1000);
    expect(s.ttft_ms).toEqual({ p50: 10.123, p90: 100, p99: 100 });
    expect(s.itl_ms).toEqual({ p50: 0, p90: 0.001, p99: 0.001 });
  });

  it('is null for every percentile when there is no sample', () => {
    const s = new LoadRecorder().summary('h:1', 1000);
    expect(s.ttft_ms).toEqual({ p50: null, p90: null, p99: null });
    expect(s.itl_ms).toEqual({ p50: null, p90: null, p99: null });
  });
});

describe('LoadRecorder counts', () => {
  it('counts a gRPC failure by its status name, an unknown code by its number, and an HTTP error by its label', () => {
    const r = new LoadRecorder();
    ended(
      r,
      { kind: 'failed', code: GrpcStatus.UNAVAILABLE },
      { kind: 'failed', code: GrpcStatus.UNAVAILABLE },
      { kind: 'failed', code: 42 as GrpcStatus },
      { kind: 'error', label: 'HTTP_500' },
    );
    expect(r.summary('h:1', 1000).errors).toEqual({ '42': 1, HTTP_500: 1, UNAVAILABLE: 2 });
    expect(r.errorCount).toBe(4);
    expect(r.completed + r.rejected).toBe(0);
  });

  it('lists errors in label order whatever order they happened in', () => {
    const r = new LoadRecorder();
    ended(r, { kind: 'error', label: 'STREAM_BROKEN' }, { kind: 'error', label: 'BAD_CHUNK' }, { kind: 'error', label: 'HTTP_404' });
    expect(Object.keys(r.summary('u', 1000).errors)).toEqual(['BAD_CHUNK', 'HTTP_404', 'STREAM_BROKEN']);
  });

  it('counts both kinds of rejection as rejected and never as an error', () => {
    const r = new LoadRecorder();
    ended(r, { kind: 'rejected' }, { kind: 'failed', code: GrpcStatus.RESOURCE_EXHAUSTED });
    expect(r.rejected).toBe(2);
    expect(r.errorCount).toBe(0);
    expect(r.summary('h:1', 1000).errors).toEqual({});
  });

  it('counts the tenant-capped of the rejections apart, in HTTP mode only', () => {
    const http = new LoadRecorder({ httpStatuses: true });
    ended(http, { kind: 'rejected', tenantCapped: true }, { kind: 'rejected' }, { kind: 'rejected', tenantCapped: false });
    expect(http.summary('u', 1000)).toMatchObject({ rejected: 3, tenant_capped: 1 });
    const grpc = new LoadRecorder();
    ended(grpc, { kind: 'failed', code: GrpcStatus.RESOURCE_EXHAUSTED });
    expect(grpc.summary('h:1', 1000)).not.toHaveProperty('tenant_capped');
  });

  it('keeps in-flight as started minus ended, and retries as the attempts started as retries', () => {
    const r = new LoadRecorder();
    r.attemptStarted(false);
    r.attemptStarted(true);
    r.attemptStarted(true);
    expect(r.inFlight).toBe(3);
    r.attemptEnded({ kind: 'completed' });
    expect(r.inFlight).toBe(2);
    expect(r.summary('h:1', 1000)).toMatchObject({ sent: 3, retries: 2, completed: 1 });
  });

  it('ignores HTTP statuses unless asked to count them (gRPC mode)', () => {
    const r = new LoadRecorder();
    r.httpStatus(200);
    expect(r.summary('h:1', 1000)).not.toHaveProperty('statuses');
    const http = new LoadRecorder({ httpStatuses: true });
    expect(http.summary('u', 1000).statuses).toEqual({});
  });
});

describe('LoadRecorder rates', () => {
  it('gives tokens/s and completed requests/s over the duration, to two decimals', () => {
    const r = new LoadRecorder();
    ended(r, { kind: 'completed' }, { kind: 'completed' }, { kind: 'rejected' });
    r.tokensReceived(10);
    r.tokensReceived(0);
    r.tokensReceived(5);
    const s = r.summary('h:1', 3000);
    expect(s.output_tokens).toBe(15);
    expect(s.tokens_per_s).toBe(5);
    // Only completed requests count: 2 in 3 s, not 3.
    expect(s.requests_per_s).toBe(0.67);
    expect(s.duration_s).toBe(3);
  });

  it('reports at least one millisecond, so a zero-length run has finite rates', () => {
    const r = new LoadRecorder();
    ended(r, { kind: 'completed' });
    const s = r.summary('h:1', 0);
    expect(s.duration_s).toBe(0.001);
    expect(s.requests_per_s).toBe(1000);
    expect(Number.isFinite(new LoadRecorder().summary('h:1', -5).tokens_per_s)).toBe(true);
  });

  it('names the target it was given', () => {
    expect(new LoadRecorder().summary('http://h:1/v1/completions', 1000).target).toBe('http://h:1/v1/completions');
  });
});

describe('LoadRecorder goodput (--slo-ttft-ms, --slo-itl-ms)', () => {
  const done = (ttftMs: number, meanItlMs: number | undefined): AttemptOutcome => ({ kind: 'completed', timing: { ttftMs, meanItlMs } });

  it('counts a completed request as good only within both bounds; a bound at the value is met', () => {
    const recorder = new LoadRecorder({ slo: { ttftMs: 100, itlMs: 20 } });
    ended(recorder, done(100, 20), done(50, undefined), done(101, 5), done(10, 21), { kind: 'completed' }, { kind: 'rejected' });
    const s = recorder.summary('t', 2000);
    expect(s.completed).toBe(5);
    expect(s.slo).toEqual({ ttft_ms: 100, itl_ms: 20, good: 2, goodput_per_s: 1 });
  });

  it('leaves an unset bound unbounded, and reports no SLO without one', () => {
    const ttftOnly = new LoadRecorder({ slo: { ttftMs: 100, itlMs: undefined } });
    ended(ttftOnly, done(99, 10_000), done(101, 1));
    expect(ttftOnly.summary('t', 1000).slo).toEqual({ ttft_ms: 100, itl_ms: null, good: 1, goodput_per_s: 1 });
    const none = new LoadRecorder();
    ended(none, done(1, 1));
    expect(none.summary('t', 1000).slo).toBeUndefined();
  });

  it('keeps the time to each refusal, and none for other endings', () => {
    const recorder = new LoadRecorder();
    for (const [outcome, ms] of [
      [{ kind: 'rejected' }, 2],
      [{ kind: 'failed', code: GrpcStatus.RESOURCE_EXHAUSTED }, 4],
      [{ kind: 'failed', code: GrpcStatus.UNAVAILABLE }, 900],
      [done(5, 1), 800],
    ] as const) {
      recorder.attemptStarted(false);
      recorder.attemptEnded(outcome, ms);
    }
    expect(recorder.summary('t', 1000).time_to_reject_ms).toEqual({ p50: 2, p90: 4, p99: 4 });
  });
});
