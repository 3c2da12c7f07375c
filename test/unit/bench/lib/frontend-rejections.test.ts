/** The overload sweep's reading of the frontend's own time to 529, from the summary it exports. */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseFrontendRejections } from '../../../../bench/lib/frontend-rejections.js';
import { FrontendMetrics } from '../../../../src/frontend/frontend-metrics.js';

describe('parseFrontendRejections', () => {
  it("reads the p50 and p99 in ms of the frontend's own summary, from the label set with the most answers", async () => {
    const registry = new Registry();
    let now = 0;
    const metrics = new FrontendMetrics(registry, () => now);
    const reject = (endpoint: 'chat_completions' | 'completions', ms: number) => {
      const record = metrics.startRequest(endpoint);
      record.setModel('m');
      now += ms;
      record.rejected();
    };
    for (let i = 1; i <= 100; i++) reject('completions', 2);
    reject('chat_completions', 900);
    const got = parseFrontendRejections(await registry.metrics());
    expect(got.count).toBe(100);
    expect(got.p50Ms).toBeCloseTo(2, 6);
    expect(got.p99Ms).toBeCloseTo(2, 6);
  });

  it('gives no quantiles when the frontend answered no 529, or exports no such series', () => {
    expect(parseFrontendRejections('')).toEqual({ count: 0, p50Ms: NaN, p99Ms: NaN });
    const none = parseFrontendRejections(
      '# TYPE dynamo_frontend_time_to_rejection_seconds summary\ndynamo_frontend_time_to_rejection_seconds_count{model="m",endpoint="completions"} 0\n',
    );
    expect(none.count).toBe(0);
  });
});
