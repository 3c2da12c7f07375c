// The request-class options: --priority-threshold-scale, --default-priority, --tenant-max-inflight, --metrics-max-tenants, with their env twins.
import { describe, expect, it } from 'vitest';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { problemsOf } from '../../support/config-problems.js';

describe('frontend config: priorities and tenants', () => {
  it('defaults: no classes, priority 0, no tenant cap, 20 tenant labels', () => {
    const c = parseFrontendConfig({}, {});
    expect(c).toMatchObject({ priorityThresholdScale: [], defaultPriority: 0, tenantMaxInflight: 0, metricsMaxTenants: 20 });
  });

  it('reads each from its flag or env twin, the flag winning; negative priorities included', () => {
    const c = parseFrontendConfig(
      { priorityThresholdScale: '5=0.5,1=0.8', defaultPriority: '-3' },
      { DYN_PRIORITY_THRESHOLD_SCALE: '9=0.1', DYN_TENANT_MAX_INFLIGHT: '4', DYN_METRICS_MAX_TENANTS: '0', DYN_DEFAULT_PRIORITY: '8' },
    );
    expect(c.priorityThresholdScale).toEqual([
      { priority: 1, scale: 0.8 },
      { priority: 5, scale: 0.5 },
    ]);
    expect(Object.isFrozen(c.priorityThresholdScale)).toBe(true);
    expect(c).toMatchObject({ defaultPriority: -3, tenantMaxInflight: 4, metricsMaxTenants: 0 });
    expect(parseFrontendConfig({}, { DYN_DEFAULT_PRIORITY: '8' }).defaultPriority).toBe(8);
  });

  it.each([
    [{ priorityThresholdScale: '1=0' }, '--priority-threshold-scale', 'priority 1: scale must be a number > 0 and <= 10, got 0'],
    [{ priorityThresholdScale: '1=11' }, '--priority-threshold-scale', 'scale must be a number > 0 and <= 10, got 11'],
    [{ priorityThresholdScale: 'low=0.5' }, '--priority-threshold-scale', 'expected a list of PRIORITY=SCALE'],
    [{ priorityThresholdScale: '1=0.5,1=0.6' }, '--priority-threshold-scale', 'priority 1 is given twice'],
    [{ defaultPriority: 'high' }, '--default-priority', 'priority must be an integer'],
    [{ defaultPriority: '2147483648' }, '--default-priority', 'priority must be between'],
    [{ tenantMaxInflight: '-1' }, '--tenant-max-inflight', 'must be an integer'],
    [{ metricsMaxTenants: 'x' }, '--metrics-max-tenants', 'must be an integer'],
  ])('%j is refused naming the flag', (flags, flag, problem) => {
    const found = problemsOf(() => parseFrontendConfig(flags, {}));
    expect(found).toEqual([expect.stringContaining(problem)]);
    expect(found[0]!.startsWith(flag)).toBe(true);
  });

  it('names the env twin when the value came from it', () => {
    expect(problemsOf(() => parseFrontendConfig({}, { DYN_PRIORITY_THRESHOLD_SCALE: '3=20' }))[0]).toContain('DYN_PRIORITY_THRESHOLD_SCALE');
  });
});
