/** FrontendRates: per-second rates from the frontend's own series between two samples, TTFT quantiles over a window, and the history. */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FrontendMetrics } from '../../../../src/frontend/frontend-metrics.js';
import { FrontendRates } from '../../../../src/frontend/status/frontend-rates.js';

function setup() {
  const registry = new Registry();
  let monotonic = 0;
  let wall = 0;
  const metrics = new FrontendMetrics(registry, () => monotonic);
  const rates = new FrontendRates(registry, { historyTicks: 5, ttftWindowTicks: 2 }, () => wall);
  const request = (status: number, ttftMs?: number, refused?: 'overloaded') => {
    const r = metrics.startRequest('chat_completions');
    r.setModel('m');
    if (refused) {
      r.workerRefused(refused);
      r.retried();
    }
    if (ttftMs !== undefined) {
      monotonic += ttftMs;
      r.tokens(1);
    }
    if (status === 529) r.rejected();
    r.finish(status);
  };
  return { rates, request, tick: (ms: number) => (wall += ms) };
}

describe('FrontendRates', () => {
  it('has no rates before two samples', async () => {
    const { rates } = setup();
    await rates.sample();
    expect(rates.latest).toEqual({ byStatus: {}, overload: 0, refusals: {}, retries: 0, ttftP50Ms: null, ttftP99Ms: null });
    expect(rates.history.toJSON().t).toEqual([]);
  });

  it('turns counts between two samples into rates per second', async () => {
    const { rates, request, tick } = setup();
    await rates.sample();
    for (let i = 0; i < 4; i++) request(200, 100);
    for (let i = 0; i < 6; i++) request(529);
    request(200, 100, 'overloaded');
    tick(2000);
    await rates.sample();
    expect(rates.latest).toMatchObject({ byStatus: { '200': 2.5, '529': 3 }, overload: 3, refusals: { overloaded: 0.5 }, retries: 0.5 });
    expect(rates.latest.ttftP50Ms).toBeGreaterThan(50);
    expect(rates.latest.ttftP50Ms).toBeLessThanOrEqual(100);
    expect(rates.history.toJSON().series).toMatchObject({ requests: [5.5], overload: [3], refusals: [0.5], retries: [0.5] });
  });

  it('forgets first tokens older than the window', async () => {
    const { rates, request, tick } = setup();
    await rates.sample();
    request(200, 100);
    for (let i = 0; i < 3; i++) {
      tick(1000);
      await rates.sample();
    }
    expect(rates.latest.ttftP50Ms).toBeNull();
    expect(rates.history.toJSON().series['ttft_p50_ms']).toEqual([expect.any(Number), expect.any(Number), null]);
  });
});
