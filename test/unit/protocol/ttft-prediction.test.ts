import { describe, expect, it } from 'vitest';
import { blocksFor, ownPrefillMs, predictTtftMs, prefillModelOf } from '../../../src/protocol/ttft-prediction.js';

describe('ttft-prediction', () => {
  const model = { baseMs: 20, tokensPerS: 10_000 };

  it.each([
    { ahead: 0, prompt: 1000, kvWaitMs: 0, expected: 120 },
    { ahead: 4000, prompt: 1000, kvWaitMs: 0, expected: 520 },
    { ahead: 0, prompt: 500, kvWaitMs: 300, expected: 370 },
  ])('predicts base + (ahead $ahead + own $prompt) / rate + KV wait $kvWaitMs = $expected ms', ({ ahead, prompt, kvWaitMs, expected }) => {
    expect(predictTtftMs(model, { prefillTokensAhead: ahead, promptTokens: prompt, kvWaitMs })).toBeCloseTo(expected, 6);
  });

  it("gives a call's own prefill and its blocks", () => {
    expect(ownPrefillMs(model, 2000)).toBeCloseTo(220, 6);
    expect([blocksFor(0, 16), blocksFor(1, 16), blocksFor(16, 16), blocksFor(17, 16)]).toEqual([0, 1, 1, 2]);
  });

  it('reads a published model only when both fields are believable', () => {
    expect(prefillModelOf(20, 10_000)).toEqual(model);
    for (const [base, rate] of [
      [null, 10_000],
      [20, null],
      [-1, 10_000],
      [20, 0],
      [20, Infinity],
      [1e12, 10_000],
      [NaN, 1],
    ] as const)
      expect(prefillModelOf(base, rate)).toBeUndefined();
  });
});
