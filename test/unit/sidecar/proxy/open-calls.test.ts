/** OpenCalls: what the drain waits for resolves when the last open call ends (told, not polled), or when the grace ends. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { OpenCall } from '../../../../src/sidecar/proxy/call-phases.js';
import { OpenCalls } from '../../../../src/sidecar/proxy/open-calls.js';

afterEach(() => {
  vi.useRealTimers();
});

const call = (): OpenCall => ({ phase: 'ending', shutdown() {} });

function settled(promise: Promise<void>): { done: boolean } {
  const state = { done: false };
  void promise.then(() => (state.done = true));
  return state;
}

describe('OpenCalls', () => {
  it('settles at once when no call is open', async () => {
    await expect(new OpenCalls().settled(60_000)).resolves.toBeUndefined();
  });

  it('settles when the last call ends and not before, with no timer of its own left', async () => {
    vi.useFakeTimers();
    const calls = new OpenCalls();
    const [a, b] = [call(), call()];
    calls.add(a);
    calls.add(b);
    const state = settled(calls.settled(60_000));
    calls.delete(a);
    calls.delete(a); // a second end of the same call changes nothing
    await vi.advanceTimersByTimeAsync(0);
    expect(state.done).toBe(false);
    expect(calls.size).toBe(1);
    calls.delete(b);
    await vi.advanceTimersByTimeAsync(0);
    expect(state.done).toBe(true);
    expect(vi.getTimerCount(), 'the grace timer was cleared').toBe(0);
  });

  it('settles after the grace with calls still open', async () => {
    vi.useFakeTimers();
    const calls = new OpenCalls();
    const held = call();
    calls.add(held);
    const state = settled(calls.settled(500));
    await vi.advanceTimersByTimeAsync(499);
    expect(state.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(state.done).toBe(true);
    expect(calls.list()).toEqual([held]);
  });

  it('lists a copy: ending calls while iterating the list skips none', () => {
    const calls = new OpenCalls();
    const all = [call(), call(), call()];
    for (const c of all) calls.add(c);
    const seen: OpenCall[] = [];
    for (const c of calls.list()) {
      seen.push(c);
      calls.delete(c);
    }
    expect(seen).toEqual(all);
    expect(calls.size).toBe(0);
  });
});
