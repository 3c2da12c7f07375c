/** RenderCache: one render per interval, shared by concurrent scrapes, refreshed after it. */
import { describe, expect, it } from 'vitest';
import { RenderCache } from '../../../../src/platform/metrics/render-cache.js';
import { countingRegistry } from '../../../support/counting-registry.js';

describe('RenderCache', () => {
  it('renders once for a flood of concurrent scrapes and serves that text to all of them', async () => {
    const { registry, collects } = countingRegistry();
    let now = 0;
    const cache = new RenderCache(() => registry.metrics(), { minIntervalMs: 1000, now: () => now });
    const texts = await Promise.all(Array.from({ length: 100 }, () => cache.text()));
    expect(collects()).toBe(1);
    expect(cache.renders).toBe(1);
    expect(new Set(texts).size).toBe(1);
    now = 999;
    for (let i = 0; i < 50; i++) await cache.text();
    expect(collects()).toBe(1);
  });

  it('renders fresh values once the interval has passed', async () => {
    const { registry, collects, set } = countingRegistry();
    let now = 0;
    const cache = new RenderCache(() => registry.metrics(), { minIntervalMs: 1000, now: () => now });
    set(1);
    expect(await cache.text()).toContain('test_value 1');
    set(2);
    expect(await cache.text()).toContain('test_value 1');
    now = 1000;
    expect(await cache.text()).toContain('test_value 2');
    expect(collects()).toBe(2);
  });

  it('with interval 0 renders every sequential scrape but still shares a running render', async () => {
    const { registry, collects } = countingRegistry();
    const cache = new RenderCache(() => registry.metrics(), { minIntervalMs: 0, now: () => 0 });
    await cache.text();
    await cache.text();
    expect(collects()).toBe(2);
    await Promise.all([cache.text(), cache.text(), cache.text()]);
    expect(collects()).toBe(3);
  });

  it('does not cache a failed render: waiters get the error, the next scrape renders again', async () => {
    let calls = 0;
    const cache = new RenderCache(
      () => {
        calls++;
        return calls === 1 ? Promise.reject(new Error('collector broke')) : Promise.resolve('ok\n');
      },
      { minIntervalMs: 1000, now: () => 0 },
    );
    const results = await Promise.allSettled([cache.text(), cache.text()]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await cache.text()).toBe('ok\n');
    expect(calls).toBe(2);
  });
});
