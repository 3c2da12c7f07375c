import { describe, expect, it } from 'vitest';
import { MIN_PREFILL_SAMPLES, PrefillLearner } from '../../../../src/sidecar/admission/prefill-model.js';
import { mulberry32 } from '../../../../src/platform/prng.js';

/** A synthetic engine: a first token after base + tokens / rate, with multiplicative noise. */
function engine(baseMs: number, tokensPerS: number, noise: number, seed = 1): (tokens: number) => number {
  const random = mulberry32(seed);
  return (tokens) => (baseMs + (tokens * 1000) / tokensPerS) * (1 + noise * (random() * 2 - 1));
}

describe('PrefillLearner', () => {
  it('gives no model before MIN_PREFILL_SAMPLES first tokens', () => {
    const learner = new PrefillLearner();
    for (let i = 0; i < MIN_PREFILL_SAMPLES - 1; i++) learner.sample(100 * (i + 1), 50 + i);
    expect(learner.model).toBeUndefined();
    learner.sample(1000, 80);
    expect(learner.model).toBeDefined();
  });

  it.each([
    { baseMs: 20, tokensPerS: 10_000, noise: 0 },
    { baseMs: 40, tokensPerS: 4_000, noise: 0.05 },
    { baseMs: 5, tokensPerS: 50_000, noise: 0.1 },
  ])('converges on a synthetic engine ($baseMs ms + tokens / $tokensPerS per s, noise $noise) within 30 calls', ({ baseMs, tokensPerS, noise }) => {
    const learner = new PrefillLearner();
    const ttft = engine(baseMs, tokensPerS, noise);
    const random = mulberry32(7);
    for (let i = 0; i < 30; i++) {
      const tokens = Math.floor(random() * 4000);
      learner.sample(tokens, ttft(tokens));
    }
    const model = learner.model!;
    expect(model.tokensPerS / tokensPerS).toBeGreaterThan(0.8);
    expect(model.tokensPerS / tokensPerS).toBeLessThan(1.25);
    // The base sits at the 90th percentile: at or above the true base, by no more than the noise allows.
    expect(model.baseMs).toBeGreaterThanOrEqual(baseMs * 0.9);
    expect(model.baseMs).toBeLessThan(baseMs + noise * (baseMs + (4000 * 1000) / tokensPerS) * 1.5 + 1);
  });

  it('follows a step change in engine speed within 40 calls', () => {
    const learner = new PrefillLearner();
    const random = mulberry32(3);
    const fast = engine(10, 20_000, 0.02);
    const slow = engine(10, 5_000, 0.02, 2);
    for (let i = 0; i < 60; i++) {
      const tokens = Math.floor(random() * 4000);
      learner.sample(tokens, fast(tokens));
    }
    expect(learner.model!.tokensPerS).toBeGreaterThan(15_000);
    for (let i = 0; i < 40; i++) {
      const tokens = Math.floor(random() * 4000);
      learner.sample(tokens, slow(tokens));
    }
    expect(learner.model!.tokensPerS).toBeLessThan(6_500);
  });

  it('gives all the time to the tokens when every sample has one size (errs late for longer prompts)', () => {
    const learner = new PrefillLearner();
    for (let i = 0; i < 10; i++) learner.sample(1000, 100);
    const model = learner.model!;
    expect(model.baseMs + (1000 * 1000) / model.tokensPerS).toBeCloseTo(100, 0);
    expect(model.baseMs + (4000 * 1000) / model.tokensPerS).toBeGreaterThan(300);
  });

  it('reads time that does not grow with tokens as a base, and ignores nonsense samples', () => {
    const learner = new PrefillLearner();
    for (const [tokens, ms] of [
      [10, 200],
      [4000, 190],
      [100, 210],
      [2000, 200],
      [50, 195],
      [3000, 205],
    ] as const)
      learner.sample(tokens, ms);
    learner.sample(NaN, 5);
    learner.sample(10, -1);
    learner.sample(10, Infinity);
    expect(learner.samples).toBe(6);
    const model = learner.model!;
    expect(model.baseMs).toBeGreaterThan(190);
    expect(model.tokensPerS).toBeGreaterThan(1e6);
  });
});
