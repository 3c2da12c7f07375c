import { describe, expect, it } from 'vitest';
import { KvLedger, type KvGeometry } from '../../../../src/sidecar/admission/kv-ledger.js';
import { OutputLengths } from '../../../../src/sidecar/admission/output-lengths.js';
import { PrefillLearner } from '../../../../src/sidecar/admission/prefill-model.js';
import { DEFAULT_STEP_TOKENS, SloAdmission } from '../../../../src/sidecar/admission/slo-admission.js';

/** An SLO admission over a ledger whose prefill model is trained on an engine of `base` ms + tokens / `rate`. */
function setUp(options: { sloMs: number; totalBlocks?: number; trained?: { baseMs: number; tokensPerS: number }; stepTokens?: number }) {
  let now = 0;
  const geometry: KvGeometry = { totalBlocks: () => options.totalBlocks, blockSize: () => 16, usedBlocks: () => undefined };
  const prefill = new PrefillLearner(0.95, 0); // z = 0: the mean line, so the expectations are exact
  let slo: SloAdmission | undefined;
  const ledger = new KvLedger(
    geometry,
    prefill,
    new OutputLengths(),
    () => now,
    () => slo!.prefillBudget(),
  );
  slo = new SloAdmission(options.sloMs, ledger, prefill, () => options.stepTokens);
  if (options.trained) {
    const { baseMs, tokensPerS } = options.trained;
    for (let i = 1; i <= 10; i++) prefill.sample(i * 500, baseMs + (i * 500 * 1000) / tokensPerS);
  }
  return { slo, ledger, advance: (ms: number) => (now += ms) };
}

describe('SloAdmission', () => {
  it('without a learned model refuses nothing by prediction, and lets prefill in a step at a time', () => {
    const { slo, ledger } = setUp({ sloMs: 100 });
    const cost = ledger.costOf(0, 100_000, 10);
    expect(slo.judge(cost, undefined)).toMatchObject({ kind: 'go', predictedMs: undefined });
    expect(slo.prefillBudget()).toBe(DEFAULT_STEP_TOKENS);
  });

  it.each([
    // prefill tokens already ahead, own prompt, SLO: predicted = 20 + (ahead + own) / 10 tokens per ms
    { ahead: 0, own: 1000, sloMs: 500, kind: 'go', predicted: 120 },
    { ahead: 3000, own: 1000, sloMs: 500, kind: 'go', predicted: 420 },
    { ahead: 5000, own: 1000, sloMs: 500, kind: 'refuse', predicted: 620 },
    { ahead: 1000, own: 7000, sloMs: 500, kind: 'refuse', predicted: 820 },
  ])('predicts $predicted ms for $own tokens behind $ahead and answers $kind under a $sloMs ms SLO', ({ ahead, own, sloMs, kind, predicted }) => {
    const { slo, ledger } = setUp({ sloMs, trained: { baseMs: 20, tokensPerS: 10_000 } });
    if (ahead > 0) ledger.take(ledger.costOf(0, ahead, 0));
    const verdict = slo.judge(ledger.costOf(0, own, 0), undefined);
    expect(verdict.kind).toBe(kind);
    expect(verdict.predictedMs).toBeCloseTo(predicted, 0);
    if (verdict.kind === 'refuse') {
      expect(verdict.reason).toBe('predicted_ttft');
      expect(verdict.pushbackMs).toBe(Math.round(predicted - (20 + own / 10))); // the predicted wait: the work ahead
    } else {
      expect(verdict.queueBudgetMs).toBe(Math.round(sloMs - (20 + (ahead + own) / 10))); // room for the prefill in the engine and its own
    }
  });

  it('counts queued prompts as ahead (projected load, not the load this instant)', () => {
    const { slo, ledger } = setUp({ sloMs: 500, trained: { baseMs: 20, tokensPerS: 10_000 } });
    ledger.take(ledger.costOf(0, 1000, 0));
    const queued = ledger.costOf(0, 4000, 0);
    ledger.queued(queued);
    const verdict = slo.judge(ledger.costOf(0, 1000, 0), undefined);
    expect(verdict.kind).toBe('refuse');
    expect(verdict.predictedMs).toBeCloseTo(620, 0);
    ledger.unqueued(queued);
    expect(slo.judge(ledger.costOf(0, 1000, 0), undefined)).toMatchObject({ kind: 'go' });
  });

  it('never refuses by prediction a call with nothing ahead of it (the probe that relearns a faster engine)', () => {
    const { slo, ledger } = setUp({ sloMs: 100, trained: { baseMs: 400, tokensPerS: 10_000 } });
    expect(slo.judge(ledger.costOf(0, 100, 0), undefined).kind).toBe('go');
  });

  it('refuses with kv_budget when the wait for KV room is most of the prediction', () => {
    const { slo, ledger, advance } = setUp({ sloMs: 500, totalBlocks: 100, trained: { baseMs: 20, tokensPerS: 10_000 } });
    // Teach the mean hold (2 s), then fill the cache.
    const taught = ledger.costOf(0, 16, 0);
    ledger.take(taught);
    advance(2000);
    ledger.give(taught);
    const holder = ledger.costOf(0, 16 * 90, 0);
    ledger.take(holder);
    ledger.firstToken(holder);
    const verdict = slo.judge(ledger.costOf(0, 16 * 50, 0), undefined); // 40 blocks short of 90 reserved: about 0.44 x 2 s
    expect(verdict).toMatchObject({ kind: 'refuse', reason: 'kv_budget' });
    expect(slo.kvWaitMs(0, 50)).toBeCloseTo((40 / 90) * 2000, 0);
  });

  it('predicts no KV wait while none of its calls is in the engine, whatever the engine counts used', () => {
    const { slo } = setUp({ sloMs: 500, totalBlocks: 100, trained: { baseMs: 20, tokensPerS: 10_000 } });
    expect(slo.kvWaitMs(0, 500)).toBe(0);
  });

  it('holds a call to its own deadline when that is shorter than the SLO', () => {
    const { slo, ledger } = setUp({ sloMs: 5000, trained: { baseMs: 20, tokensPerS: 10_000 } });
    ledger.take(ledger.costOf(0, 2000, 0));
    expect(slo.judge(ledger.costOf(0, 1000, 0), 250)).toMatchObject({ kind: 'refuse' });
    expect(slo.judge(ledger.costOf(0, 1000, 0), 400)).toMatchObject({ kind: 'go', queueBudgetMs: 80 });
  });

  it("budgets the prefill the engine can do within the SLO, at least a step's worth", () => {
    expect(setUp({ sloMs: 520, trained: { baseMs: 20, tokensPerS: 10_000 }, stepTokens: 2048 }).slo.prefillBudget()).toBeCloseTo(5000, 0);
    expect(setUp({ sloMs: 30, trained: { baseMs: 20, tokensPerS: 10_000 }, stepTokens: 8192 }).slo.prefillBudget()).toBe(8192);
  });
});
