/** A gate waiter from a plain function, for tests: the gate itself takes only the object form (OnAdmit). */
import type { OnAdmit, Permit } from '../../src/sidecar/admission/gate.js';

export function admitting(onAdmitted: (permit: Permit) => void): OnAdmit {
  return { onAdmitted };
}
