import { describe, expect, it } from 'vitest';
import { KvLedger } from '../../../../src/sidecar/admission/kv-ledger.js';
import { OutputLengths } from '../../../../src/sidecar/admission/output-lengths.js';
import { PrefillLearner } from '../../../../src/sidecar/admission/prefill-model.js';
import { SloAdmission } from '../../../../src/sidecar/admission/slo-admission.js';
import { GenerateWork, trackerGeometry } from '../../../../src/sidecar/load/call-work.js';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { UNDECODED_PROMPT_TOKENS } from '../../../../src/sidecar/admission/kv-ledger.js';
import { generateRequestBytes } from '../../../support/proto-bytes.js';

function setUp() {
  const tracker = new LoadTracker({ workerId: 1, dataParallelSize: 2, kvBlockSize: 16, kvTotalBlocks: 100 });
  const prefill = new PrefillLearner();
  const ledger = new KvLedger(trackerGeometry(tracker), prefill, new OutputLengths(), () => 0);
  const work = new GenerateWork('vllm', tracker, ledger, new SloAdmission(500, ledger, prefill));
  return { tracker, ledger, work };
}

describe('GenerateWork', () => {
  it("wants the wire's Generate RPC only", () => {
    const { work } = setUp();
    expect(work.wants('/vllm.grpc.engine.VllmEngine/Generate')).toBe(true);
    expect(work.wants('/vllm.grpc.engine.VllmEngine/GetModelInfo')).toBe(false);
    expect(work.wants(undefined)).toBe(false);
  });

  it('costs a call by its prompt and max_tokens, on the rank its header names', () => {
    const { work } = setUp();
    const cost = work.costOf({ 'x-data-parallel-rank': '1' }, generateRequestBytes('vllm', 100));
    expect([cost.rank, cost.promptTokens, cost.blocks]).toEqual([1, 100, Math.ceil((100 + 16) / 16)]);
  });

  it('costs a call whose message is missing or garbage at the conservative size, on rank 0 for a bad rank', () => {
    const { work } = setUp();
    for (const message of [undefined, Buffer.from([0xff, 0xff, 0xff])]) {
      const cost = work.costOf({ 'x-data-parallel-rank': '7' }, message);
      expect([cost.rank, cost.promptTokens]).toEqual([0, UNDECODED_PROMPT_TOKENS]);
    }
  });

  it("reads the rank's KV geometry from the load tracker", () => {
    const { tracker } = setUp();
    const geometry = trackerGeometry(tracker);
    expect([geometry.totalBlocks(0), geometry.blockSize(0), geometry.usedBlocks(0)]).toEqual([100, 16, undefined]);
  });
});
