/**
 * The calls the ingress has taken in and not yet finished with: a call joins when it is admitted
 * or queued, and leaves when it ends, that is once its trailers went to the client (or it was
 * refused, cut, or its client went away). The drain waits on this, not on the admission gate: a
 * call leaves the gate when its engine leg ends, which can be well before its last frames and
 * trailers reach a client that reads slowly.
 */
import type { OpenCall } from './call-phases.js';

export class OpenCalls {
  private readonly calls = new Set<OpenCall>();
  private readonly onEmpty = new Set<() => void>();

  get size(): number {
    return this.calls.size;
  }

  add(call: OpenCall): void {
    this.calls.add(call);
  }

  delete(call: OpenCall): void {
    if (!this.calls.delete(call) || this.calls.size > 0) return;
    for (const listener of [...this.onEmpty]) listener();
  }

  /** The calls open now, as a copy: ending one removes it while the caller iterates. */
  list(): OpenCall[] {
    return [...this.calls];
  }

  /** Resolves once no call is open (told by delete, no polling), or after graceMs. */
  settled(graceMs: number): Promise<void> {
    if (this.calls.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.onEmpty.delete(done);
        resolve();
      };
      const timer = setTimeout(done, graceMs);
      this.onEmpty.add(done);
    });
  }
}
