/** A gate waiter from plain functions, for tests: the gate itself takes only the object form (OnAdmit). */
import type { OnAdmit, Permit } from '../../src/sidecar/admission/gate.js';

export function admitting(onAdmitted: (permit: Permit) => void, onDisplaced: () => void = () => {}): OnAdmit {
  return { onAdmitted, onDisplaced };
}
