/**
 * The cost of the --ttft-slo-ms decision per call, against the gate alone, in one process:
 * each call is costed (KvLedger.costOf), judged (SloAdmission.judge) and admitted through the gate
 * with the ledger as its budget, then given its first token and released, 32 calls in flight; the
 * gate alone does the same without cost or budget. Rounds alternate, and the table gives each
 * round and the median of the per-round difference. Goal (issue 33): at most 2 us per call.
 *
 *   node --import tsx bench/slo-decision.ts [--calls 1000000] [--rounds 5]
 */
import { parseArgs } from 'node:util';
import { AdmissionGate, type Permit } from '../src/sidecar/admission/gate.js';
import { KvLedger, type CallCost } from '../src/sidecar/admission/kv-ledger.js';
import { OutputLengths } from '../src/sidecar/admission/output-lengths.js';
import { PrefillLearner } from '../src/sidecar/admission/prefill-model.js';
import { SloAdmission } from '../src/sidecar/admission/slo-admission.js';
const onAdmit = { onAdmitted() {}, onDisplaced() {} };
function run(withSlo: boolean, n: number): number {
  const gate = new AdmissionGate(64, 16);
  const prefill = new PrefillLearner();
  const outputs = new OutputLengths();
  let slo!: SloAdmission;
  const ledger = new KvLedger(
    { totalBlocks: () => 1_000_000, blockSize: () => 16, usedBlocks: () => undefined },
    prefill,
    outputs,
    () => performance.now(),
    () => slo.prefillBudget(),
  );
  slo = new SloAdmission(500, ledger, prefill, () => 8192);
  for (let i = 0; i < 20; i++) prefill.sample(100 * i, 10 + i);
  for (let i = 0; i < 20; i++) outputs.completed(64);
  if (withSlo) gate.setBudget(ledger);
  const held: Permit[] = [];
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    let cost: CallCost | undefined;
    if (withSlo) {
      cost = ledger.costOf(0, 128 + (i % 512), 64);
      const v = slo.judge(cost, undefined);
      if (v.kind === 'refuse') continue;
    }
    const a = gate.acquire(onAdmit, undefined, cost);
    if (a.kind === 'admitted') {
      held.push(a.permit);
      if (held.length > 32) {
        const p = held.shift()!;
        p.firstToken();
        p.release();
      }
    }
  }
  return Number(process.hrtime.bigint() - t0) / n;
}
const { values } = parseArgs({ options: { calls: { type: 'string', default: '1000000' }, rounds: { type: 'string', default: '5' } } });
const calls = Number(values.calls);
const rounds = Number(values.rounds);
if (!(calls >= 1000) || !(Number.isInteger(rounds) && rounds >= 1)) {
  console.error('usage: node --import tsx bench/slo-decision.ts [--calls N >= 1000] [--rounds K >= 1]');
  process.exit(2);
}
const rows: { round: number; gate: number; slo: number }[] = [];
for (let round = 1; round <= rounds; round++) {
  process.stderr.write(`round ${round}/${rounds}\r`);
  const gate = run(false, calls);
  const slo = run(true, calls);
  rows.push({ round, gate, slo });
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log('round  gate alone ns/call  gate + SLO decision ns/call  difference ns');
for (const r of rows)
  console.log(
    `${String(r.round).padStart(5)}  ${r.gate.toFixed(0).padStart(18)}  ${r.slo.toFixed(0).padStart(27)}  ${(r.slo - r.gate).toFixed(0).padStart(13)}`,
  );
const extra = median(rows.map((r) => r.slo - r.gate));
console.log(`median extra cost of the SLO decision: ${extra.toFixed(0)} ns per call (goal <= 2000 ns): ${extra <= 2000 ? 'met' : 'MISSED'}`);
