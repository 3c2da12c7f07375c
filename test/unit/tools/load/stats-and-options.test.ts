// Pure parts of the load client: percentiles, the count invariant, option parsing, retry timing.
import { ConfigError } from '../../../../src/platform/config/config-error.js';
import { Metadata } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { resolveLoadOptions, type LoadOptions } from '../../../../src/tools/load/options.js';
import { loadSettingsFromCli, parseIntRange, type LoadCliValues } from '../../../../src/tools/load/cli-options.js';
import { readPushback, retryDelayMs } from '../../../../src/tools/load/retry.js';
import { LoadRecorder, percentile } from '../../../../src/tools/load/stats.js';

/** The options alone, as most tests here need them. */
const loadOptionsFromCli = (values: LoadCliValues): LoadOptions => loadSettingsFromCli(values).options;

describe('percentile', () => {
  it('uses the nearest rank and is null without samples', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(sorted, 0.5)).toBe(50);
    expect(percentile(sorted, 0.9)).toBe(90);
    expect(percentile(sorted, 0.99)).toBe(99);
    expect(percentile([7], 0.99)).toBe(7);
    expect(percentile([], 0.5)).toBeNull();
  });
});

describe('LoadRecorder', () => {
  it('puts every ended attempt in exactly one bucket so sent = completed + rejected + errors', () => {
    const r = new LoadRecorder();
    const outcomes = [
      { kind: 'completed' as const },
      { kind: 'failed' as const, code: GrpcStatus.RESOURCE_EXHAUSTED },
      { kind: 'failed' as const, code: GrpcStatus.UNAVAILABLE },
      { kind: 'failed' as const, code: GrpcStatus.CANCELLED },
      { kind: 'bad-response' as const, label: 'NO_COMPLETE' as const },
    ];
    for (const [i, o] of outcomes.entries()) {
      r.attemptStarted(i > 2);
      r.attemptEnded(o);
    }
    const s = r.summary('h:1', 1000);
    expect(s).toMatchObject({ sent: 5, completed: 1, rejected: 1, retries: 2, errors: { UNAVAILABLE: 1, CANCELLED: 1, NO_COMPLETE: 1 } });
    expect(s.completed + s.rejected + Object.values(s.errors).reduce((a, b) => a + b, 0)).toBe(s.sent);
    expect(r.inFlight).toBe(0);
  });

  it('reports rates that agree with the reported duration, even with a fraction of a millisecond', () => {
    const r = new LoadRecorder();
    for (let i = 0; i < 20; i++) {
      r.attemptStarted(false);
      r.attemptEnded({ kind: 'completed' });
    }
    const s = r.summary('h:1', 123.4);
    expect(s.duration_s).toBe(0.123);
    expect(s.requests_per_s).toBeCloseTo(20 / s.duration_s, 2);
  });

  it('counts HTTP outcomes the same way and statuses by code, only when asked to', () => {
    const r = new LoadRecorder({ httpStatuses: true });
    const outcomes = [
      [200, { kind: 'completed' as const }],
      [529, { kind: 'rejected' as const }],
      [529, { kind: 'rejected' as const }],
      [404, { kind: 'error' as const, label: 'HTTP_404' }],
      [200, { kind: 'error' as const, label: 'STREAM_BROKEN' }],
      [undefined, { kind: 'error' as const, label: 'NETWORK_ECONNREFUSED' }],
    ] as const;
    for (const [status, outcome] of outcomes) {
      r.attemptStarted(false);
      if (status !== undefined) r.httpStatus(status);
      r.attemptEnded(outcome);
    }
    const s = r.summary('http://h:1/v1/chat/completions', 1000);
    expect(s).toMatchObject({ sent: 6, completed: 1, rejected: 2, errors: { HTTP_404: 1, STREAM_BROKEN: 1, NETWORK_ECONNREFUSED: 1 } });
    expect(s.statuses).toEqual({ '200': 2, '404': 1, '529': 2 });
    expect(Object.keys(s.statuses!)).toEqual(['200', '404', '529']);
    expect(new LoadRecorder().summary('h:1', 1000)).not.toHaveProperty('statuses');
  });
});

describe('load options', () => {
  it('parses fixed values and inclusive ranges', () => {
    expect(parseIntRange('128')).toEqual({ min: 128, max: 128 });
    expect(parseIntRange('64-256')).toEqual({ min: 64, max: 256 });
    expect(parseIntRange('x')).toBeUndefined();
    expect(parseIntRange('-5')).toBeUndefined();
  });

  it('defaults to a 10 s closed loop of concurrency 1', () => {
    expect(resolveLoadOptions({ target: '127.0.0.1:1' })).toMatchObject({ concurrency: 1, rate: undefined, durationS: 10, count: undefined });
  });

  it('names every bad flag at once', () => {
    const attempt = () => loadOptionsFromCli({ target: 'nohost', concurrency: '0', maxTokens: '9-3', retry: 'x' });
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      const flags = (error as ConfigError).errors.map((e) => e.flag).sort();
      expect(flags).toEqual(['--concurrency', '--max-tokens', '--retry', '--target']);
    }
  });

  it('refuses a closed and an open loop together, and a missing target', () => {
    expect(() => loadOptionsFromCli({ target: 'a:1', concurrency: '2', rate: '5' })).toThrow(/--rate: cannot be combined with --concurrency/);
    expect(() => loadOptionsFromCli({})).toThrow(/--target: is required/);
  });
});

describe('retry timing', () => {
  it('uses pushback exactly, stops on a negative or malformed pushback, else backs off with jitter', () => {
    const md = (v: string) => {
      const m = new Metadata();
      m.set('grpc-retry-pushback-ms', v);
      return m;
    };
    expect(readPushback(md('250'))).toBe(250);
    expect(readPushback(md('-1'))).toBe('stop');
    expect(readPushback(md('soon'))).toBe('stop');
    expect(readPushback(new Metadata())).toBeUndefined();
    expect(retryDelayMs(3, 250, 50, 5000, () => 0.5)).toBe(250);
    expect(retryDelayMs(0, 'stop', 50, 5000, () => 0.5)).toBeUndefined();
    expect(retryDelayMs(0, undefined, 50, 5000, () => 0)).toBe(25);
    expect(retryDelayMs(2, undefined, 50, 5000, () => 0.999)).toBeCloseTo(199.9, 1);
    expect(retryDelayMs(20, undefined, 50, 5000, () => 0)).toBe(2500);
  });
});
