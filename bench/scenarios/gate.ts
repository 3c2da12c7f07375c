/**
 * Scenario 5: the admission gate alone (src/sidecar/admission/gate.ts), in its own pinned process.
 * Not part of the default run (no goal of its own any more); --scenario gate selects it.
 */
import { runClient } from '../lib/client.js';
import { runRounds } from './rounds.js';
import { newResult, type BenchContext, type ScenarioResult } from './types.js';

interface LoopResult {
  label: string;
  pairsPerSec: number;
  opsPerSec: number;
  nsPerPair: number;
}

export async function runGate(ctx: BenchContext): Promise<ScenarioResult> {
  const durationMs = ctx.options.quick ? 300 : 2000;
  const result = newResult(
    'gate',
    'Scenario 5: AdmissionGate microbenchmark',
    [
      `child process pinned to the proxy CPU; each loop timed over whole batches of 100k for ${durationMs} ms after a 100k warm-up`,
      'fast path: acquire() admitted + permit.release() (64 permits outstanding); queue path: engine full (N=32, Q=16), acquire() queued + release() handing the slot to the head waiter',
      'pairs/s counts one acquire + one release as one; ops/s counts them as two',
    ],
    [
      { key: 'pairsPerSec', label: 'acquire+release pairs/s', digits: 0 },
      { key: 'opsPerSec', label: 'ops/s', digits: 0 },
      { key: 'nsPerPair', label: 'ns/pair', digits: 1 },
    ],
  );
  const cache = new Map<number, { fastPath: LoopResult; queuePath: LoopResult }>();
  const measure = async (round: number): Promise<{ fastPath: LoopResult; queuePath: LoopResult }> => {
    let r = cache.get(round);
    if (!r) {
      r = await runClient<{ fastPath: LoopResult; queuePath: LoopResult }>('gate-worker', { durationMs }, ctx.plan.proxy, 60_000);
      cache.set(round, r);
      ctx.log(`  gate: ${(r.fastPath.pairsPerSec / 1e6).toFixed(2)}M pairs/s fast path, ${(r.queuePath.pairsPerSec / 1e6).toFixed(2)}M queue path`);
    }
    return r;
  };
  await runRounds(result, {
    targets: ['fast path', 'queue path'],
    rounds: ctx.options.rounds,
    measure: async (name, round) => {
      const r = await measure(round);
      const loop = name === 'fast path' ? r.fastPath : r.queuePath;
      return { pairsPerSec: loop.pairsPerSec, opsPerSec: loop.opsPerSec, nsPerPair: loop.nsPerPair };
    },
  });
  return result;
}
