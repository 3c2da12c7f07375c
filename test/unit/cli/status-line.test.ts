/** The demo's status line: N and Q as in force, rates over the time since the last line, and the draining mark. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StatusLine } from '../../../src/cli/status-line.js';
import type { RunningSidecar } from '../../../src/sidecar/sidecar.js';

interface FakeSidecar {
  gate: { inEngine: number; queued: number; limit: number; queueLimit: number };
  draining: boolean;
  totals: { rejected: number; outputTokens: number };
}

const fake = (): FakeSidecar & Pick<RunningSidecar, 'counters'> => {
  const sidecar = {
    gate: { inEngine: 0, queued: 0, limit: 32, queueLimit: 16 },
    draining: false,
    totals: { rejected: 0, outputTokens: 0 },
    counters: () => ({ ...sidecar.totals }),
  };
  return sidecar;
};

describe('StatusLine', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('shows the gate and the rates since the last line', () => {
    let now = 1000;
    const sidecar = fake();
    const out: string[] = [];
    const line = new StatusLine(sidecar as unknown as RunningSidecar, { write: (s) => out.push(s) }, 5000, () => now);
    Object.assign(sidecar.gate, { inEngine: 32, queued: 16 });
    sidecar.totals = { rejected: 1520, outputTokens: 11_550 };
    now += 5000;
    expect(line.format()).toBe('[status] engine 32/32 | queued 16/16 | rejected 1520 (+304/s) | 2310 tok/s');
    sidecar.totals = { rejected: 1530, outputTokens: 11_550 };
    now += 1000;
    expect(line.format()).toBe('[status] engine 32/32 | queued 16/16 | rejected 1530 (+10/s) | 0 tok/s');
    line.stop();
  });

  it('says "queue off" without a limit and marks draining', () => {
    const sidecar = fake();
    Object.assign(sidecar.gate, { inEngine: 3, limit: Infinity });
    sidecar.draining = true;
    const line = new StatusLine(sidecar as unknown as RunningSidecar, { write: () => {} }, 5000, () => 0);
    expect(line.format()).toBe('[status] engine 3 | queue off | rejected 0 (+0/s) | 0 tok/s | draining');
    line.stop();
  });

  it('writes a line every interval until stopped', () => {
    const out: string[] = [];
    const line = new StatusLine(fake() as unknown as RunningSidecar, { write: (s) => out.push(s) }, 5000, () => 0);
    vi.advanceTimersByTime(10_000);
    expect(out).toHaveLength(2);
    expect(out[0]).toMatch(/^\[status\] engine 0\/32 .*\n$/);
    line.stop();
    vi.advanceTimersByTime(10_000);
    expect(out).toHaveLength(2);
  });
});
