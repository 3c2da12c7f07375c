/**
 * AdmissionGate microbenchmark, alone in its own (pinned) process: the gate's cost without any
 * HTTP/2 around it. Two loops, each timed over whole batches until the time budget is spent:
 *   fast path   acquire (admitted) + permit.release(), 64 permits outstanding at a time
 *   queue path  engine full: acquire (queued), then release one permit, which hands the slot to
 *               the queued waiter (FIFO handoff) - the overloaded steady state
 */
import { AdmissionGate, type Permit } from '../../src/sidecar/admission/gate.js';
import { emit, readParams } from './common.js';

interface Params {
  durationMs: number;
}

const { durationMs } = readParams<Params>();
const BATCH = 100_000;

function timeLoop(label: string, body: (n: number) => void): { label: string; pairsPerSec: number; opsPerSec: number; nsPerPair: number } {
  body(BATCH); // warm-up, lets the JIT settle
  let pairs = 0;
  const start = process.hrtime.bigint();
  const budget = BigInt(durationMs) * 1_000_000n;
  let elapsed = 0n;
  for (let i = 0; i < 100_000 && elapsed < budget; i++) {
    body(BATCH);
    pairs += BATCH;
    elapsed = process.hrtime.bigint() - start;
  }
  const seconds = Number(elapsed) / 1e9;
  return { label, pairsPerSec: pairs / seconds, opsPerSec: (2 * pairs) / seconds, nsPerPair: (seconds * 1e9) / pairs };
}

let sink = 0;
const fast = new AdmissionGate(1_000_000, 16);
// A fixed ring of 64 outstanding permits: the oldest is released as each new one is admitted.
const ring: (Permit | undefined)[] = new Array<Permit | undefined>(64).fill(undefined);
let slot = 0;
const noop = { onAdmitted: (): void => {}, onDisplaced: (): void => {} };
const fastPath = timeLoop('admit+release (fast path)', (n) => {
  for (let i = 0; i < n; i++) {
    const a = fast.acquire(noop);
    ring[slot]?.release();
    ring[slot] = a.kind === 'admitted' ? a.permit : undefined;
    slot = (slot + 1) & 63;
  }
});

const queueGate = new AdmissionGate(32, 16);
const held: Permit[] = [];
const onAdmit = { onAdmitted: (permit: Permit): void => void held.push(permit), onDisplaced: (): void => {} };
for (let i = 0; i < 32; i++) {
  const a = queueGate.acquire(onAdmit);
  if (a.kind === 'admitted') held.push(a.permit);
}
const queuePath = timeLoop('enqueue+handoff (engine full)', (n) => {
  for (let i = 0; i < n; i++) {
    const a = queueGate.acquire(onAdmit);
    if (a.kind === 'queued') sink++;
    held.shift()!.release();
  }
});

emit({ fastPath, queuePath, sink: sink > 0, inEngine: queueGate.inEngine, queued: queueGate.queued });
