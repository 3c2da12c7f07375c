/**
 * The drain's wait: no polling, the gate says when its counts change. A call that ends frees its
 * slot (and hands it to a queued call) through the gate, so its change events see every step.
 */
import type { AdmissionGate } from './gate.js';

/** Resolves once no call is in the engine or queued (told by the gate's own change events), or after graceMs. */
export function callsDone(gate: Pick<AdmissionGate, 'inEngine' | 'queued' | 'subscribe'>, graceMs: number): Promise<void> {
  if (gate.inEngine + gate.queued === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      unsubscribe();
      resolve();
    };
    const timer = setTimeout(done, graceMs);
    const unsubscribe = gate.subscribe(() => {
      if (gate.inEngine + gate.queued === 0) done();
    });
  });
}
