// runLoad against the simulated engine and against a server that pushes back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { runLoad } from '../../../../src/tools/load/run.js';
import type { LoadSummary } from '../../../../src/tools/load/stats.js';
import { startPushbackServer } from '../../../support/pushback-server.js';

const errorsTotal = (s: LoadSummary): number => Object.values(s.errors).reduce((a, b) => a + b, 0);

describe('runLoad against the simulated engine', () => {
  let engine: RunningEngine;

  beforeAll(async () => {
    engine = await startSimulatedEngine({ decodeStepMs: 2, prefillTokensPerS: 1_000_000, seed: 3 });
  });

  afterAll(async () => {
    await engine?.close();
  });

  it('completes exactly --count requests in a closed loop with consistent counts and sane percentiles', async () => {
    const progress: number[] = [];
    const s = await runLoad(
      { target: engine.address, concurrency: 4, count: 20, promptTokens: { min: 16, max: 64 }, maxTokens: { min: 5, max: 10 }, progressIntervalMs: 20 },
      { onProgress: (p) => progress.push(p.sent) },
    );
    expect(s).toMatchObject({ sent: 20, completed: 20, rejected: 0, errors: {}, retries: 0 });
    expect(s.sent).toBe(s.completed + s.rejected + errorsTotal(s));
    expect(s.output_tokens).toBeGreaterThanOrEqual(100);
    expect(s.output_tokens).toBeLessThanOrEqual(200);
    expect(s.ttft_ms.p50!).toBeGreaterThan(0);
    expect(s.ttft_ms.p50!).toBeLessThanOrEqual(s.ttft_ms.p90!);
    expect(s.ttft_ms.p90!).toBeLessThanOrEqual(s.ttft_ms.p99!);
    // Decode steps are 2 ms; a gap far below or far above would mean mis-measurement.
    expect(s.itl_ms.p50!).toBeGreaterThan(1);
    expect(s.itl_ms.p50!).toBeLessThan(50);
    expect(s.tokens_per_s).toBeGreaterThan(0);
    expect(s.requests_per_s).toBeCloseTo(20 / s.duration_s, 0);
    expect(engine.stats()).toMatchObject({ running: 0, waiting: 0, usedBlocks: 0 });
    expect(progress.length).toBeGreaterThan(0);
  });

  it('issues arrivals at a fixed rate in an open loop and stops at the duration', async () => {
    const s = await runLoad({
      target: engine.address,
      rate: 50,
      arrival: 'fixed',
      durationS: 0.5,
      promptTokens: { min: 8, max: 8 },
      maxTokens: { min: 3, max: 3 },
    });
    expect(s.sent).toBeGreaterThanOrEqual(20);
    expect(s.sent).toBeLessThanOrEqual(27);
    expect(s.completed).toBe(s.sent);
    expect(s.duration_s).toBeLessThan(2);
  });

  it('counts calls cut off by their deadline as DEADLINE_EXCEEDED errors', async () => {
    const s = await runLoad({ target: engine.address, concurrency: 2, count: 4, maxTokens: { min: 500, max: 500 }, deadlineMs: 50 });
    expect(s).toMatchObject({ sent: 4, completed: 0, errors: { DEADLINE_EXCEEDED: 4 } });
  });

  it('cancels calls still running when the grace period ends', async () => {
    const s = await runLoad({ target: engine.address, concurrency: 2, durationS: 0.1, graceS: 0.1, maxTokens: { min: 4000, max: 4000 } });
    expect(s.errors['CANCELLED']).toBe(2);
    expect(s.sent).toBe(s.completed + s.rejected + errorsTotal(s));
    expect(s.duration_s).toBeLessThan(1);
  });
});

describe('runLoad retries', () => {
  it('retries RESOURCE_EXHAUSTED after exactly the pushback the server asked for', async () => {
    const server = await startPushbackServer(2, '150');
    try {
      const s = await runLoad({ target: server.address, concurrency: 1, count: 1, retry: 3 });
      expect(s).toMatchObject({ sent: 3, rejected: 2, completed: 1, retries: 2, errors: {} });
      const gaps = server.arrivals.slice(1).map((t, i) => t - server.arrivals[i]!);
      for (const gap of gaps) {
        expect(gap).toBeGreaterThanOrEqual(145);
        expect(gap).toBeLessThan(400);
      }
    } finally {
      await server.close();
    }
  });

  it('gives up after --retry attempts, and never retries without --retry', async () => {
    const server = await startPushbackServer(100, '1');
    try {
      expect(await runLoad({ target: server.address, count: 2, retry: 2 })).toMatchObject({ sent: 6, rejected: 6, completed: 0, retries: 4 });
      expect(await runLoad({ target: server.address, count: 2 })).toMatchObject({ sent: 2, rejected: 2, retries: 0 });
    } finally {
      await server.close();
    }
  });

  it('does not retry when the pushback says not to', async () => {
    const server = await startPushbackServer(100, '-1');
    try {
      expect(await runLoad({ target: server.address, count: 1, retry: 5 })).toMatchObject({ sent: 1, rejected: 1 });
    } finally {
      await server.close();
    }
  });

  it('backs off with jitter when there is no pushback', async () => {
    const server = await startPushbackServer(1, undefined);
    try {
      const s = await runLoad({ target: server.address, count: 1, retry: 1, retryBaseMs: 100 });
      expect(s).toMatchObject({ sent: 2, completed: 1, rejected: 1 });
      const gap = server.arrivals[1]! - server.arrivals[0]!;
      expect(gap).toBeGreaterThanOrEqual(45);
      expect(gap).toBeLessThan(300);
    } finally {
      await server.close();
    }
  });
});
