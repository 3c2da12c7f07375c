/** callsDone: the drain resolves on the gate's own change events, or when the grace ends. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { callsDone } from '../../../../src/sidecar/admission/calls-done.js';
import { AdmissionGate, type Permit } from '../../../../src/sidecar/admission/gate.js';
import { admitting } from '../../../support/admitting.js';

afterEach(() => {
  vi.useRealTimers();
});

function settled(promise: Promise<void>): { done: boolean } {
  const state = { done: false };
  void promise.then(() => (state.done = true));
  return state;
}

describe('callsDone', () => {
  it('resolves at once when nothing is in the engine or queued', async () => {
    await expect(callsDone(new AdmissionGate(2, 2), 60_000)).resolves.toBeUndefined();
  });

  it('resolves when the last call ends, a queued one included, and not before, with no timer of its own firing', async () => {
    vi.useFakeTimers();
    const gate = new AdmissionGate(1, 1);
    const first = gate.acquire(admitting(() => {}));
    let queuedPermit: Permit | undefined;
    gate.acquire(admitting((permit) => (queuedPermit = permit)));
    const state = settled(callsDone(gate, 60_000));
    if (first.kind !== 'admitted') throw new Error('expected admitted');
    first.permit.release(); // hands the slot to the queued call: still one in the engine
    await vi.advanceTimersByTimeAsync(0);
    expect(state.done).toBe(false);
    queuedPermit!.release();
    await vi.advanceTimersByTimeAsync(0);
    expect(state.done).toBe(true);
    expect(vi.getTimerCount()).toBe(0); // the grace timer was cleared
  });

  it('resolves after the grace with the calls still there', async () => {
    vi.useFakeTimers();
    const gate = new AdmissionGate(1, 0);
    const held = gate.acquire(admitting(() => {}));
    const state = settled(callsDone(gate, 500));
    await vi.advanceTimersByTimeAsync(499);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.done).toBe(true);
    expect(gate.inEngine).toBe(1);
    if (held.kind === 'admitted') held.permit.release();
  });
});
