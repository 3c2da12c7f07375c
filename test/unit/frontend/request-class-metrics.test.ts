// RequestClassMetrics: outcomes per class and tenant, and the per-tenant in-flight gauge, with the tenant label bounded (first K, then "other").
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestClassMetrics } from '../../../src/frontend/request-class-metrics.js';
import { metricValue } from '../../support/frontend-fakes.js';

describe('RequestClassMetrics', () => {
  it('counts outcomes per class, and per tenant only for requests with one', async () => {
    const registry = new Registry();
    const metrics = new RequestClassMetrics(registry, 5);
    metrics.outcome('default', undefined, 'served');
    metrics.outcome('5', 'a', 'overloaded');
    metrics.outcome('5', 'a', 'tenant_capped');
    metrics.outcome('1', 'b', 'error');
    const classes = (priority_class: string, outcome: string) =>
      metricValue(registry, 'dynamo_frontend_priority_class_requests_total', { priority_class, outcome });
    expect(await classes('default', 'served')).toBe(1);
    expect(await classes('5', 'overloaded')).toBe(1);
    expect(await classes('5', 'tenant_capped')).toBe(1);
    expect(await classes('1', 'error')).toBe(1);
    const tenants = (await registry.getSingleMetric('dynamo_frontend_tenant_requests_total')!.get()).values;
    expect(tenants.map((v) => [v.labels['tenant'], v.labels['outcome'], v.value])).toEqual([
      ['a', 'overloaded', 1],
      ['a', 'tenant_capped', 1],
      ['b', 'error', 1],
    ]);
  });

  it('gives the first K tenants a label each and counts the rest as "other", in both series', async () => {
    const registry = new Registry();
    const metrics = new RequestClassMetrics(registry, 2);
    for (const tenant of ['a', 'b', 'c', 'd', 'a']) metrics.outcome('default', tenant, 'served');
    const served = (tenant: string) => metricValue(registry, 'dynamo_frontend_tenant_requests_total', { tenant, outcome: 'served' });
    expect(await served('a')).toBe(2);
    expect(await served('b')).toBe(1);
    expect(await served('other')).toBe(2);
    expect(await served('c')).toBeUndefined();

    metrics.tenantCount('c', 1);
    metrics.tenantCount('d', 1);
    metrics.tenantCount('d', 2);
    const inflight = (tenant: string) => metricValue(registry, 'dynamo_frontend_tenant_inflight_requests', { tenant });
    expect(await inflight('other')).toBe(3);
    metrics.tenantCount('c', 0);
    metrics.tenantCount('d', 1);
    expect(await inflight('other')).toBe(1);
    metrics.tenantCount('a', 1);
    expect(await inflight('a')).toBe(1);
    metrics.tenantCount('a', 0);
    metrics.tenantCount('d', 0);
    expect(await inflight('a')).toBe(0);
    expect(await inflight('other')).toBe(0);
  });

  it('with K = 0 puts every tenant under "other"', async () => {
    const registry = new Registry();
    const metrics = new RequestClassMetrics(registry, 0);
    metrics.outcome('default', 'a', 'served');
    expect(await metricValue(registry, 'dynamo_frontend_tenant_requests_total', { tenant: 'other', outcome: 'served' })).toBe(1);
  });
});
