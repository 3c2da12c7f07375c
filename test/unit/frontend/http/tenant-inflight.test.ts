// TenantInflight: the cap per tenant, counts that never leak (release is idempotent), and Retry-After from the hold times.
import { describe, expect, it } from 'vitest';
import { TenantInflight, type TenantAdmission, type TenantLease } from '../../../../src/frontend/http/tenant-inflight.js';
import { mulberry32 } from '../../../../src/platform/prng.js';

function lease(admission: TenantAdmission): TenantLease {
  if (admission.kind !== 'admitted') throw new Error('expected a lease');
  return admission.lease;
}

describe('TenantInflight', () => {
  it('admits up to max per tenant, caps the next one, and admits again once one is released', () => {
    const tenants = new TenantInflight(2, () => 0);
    const a1 = lease(tenants.admit('a'));
    lease(tenants.admit('a'));
    expect(tenants.admit('a').kind).toBe('capped');
    expect(tenants.admit('b').kind).toBe('admitted');
    a1.release();
    expect(tenants.count('a')).toBe(1);
    expect(tenants.admit('a').kind).toBe('admitted');
  });

  it('counts but never caps with max 0', () => {
    const tenants = new TenantInflight(0, () => 0);
    for (let i = 0; i < 100; i++) lease(tenants.admit('a'));
    expect(tenants.count('a')).toBe(100);
  });

  it('releases once however often release() is called, and forgets a tenant at 0', () => {
    const counts: [string, number][] = [];
    const tenants = new TenantInflight(1, () => 0, { onCount: (tenant, count) => counts.push([tenant, count]) });
    const first = lease(tenants.admit('a'));
    first.release();
    first.release();
    expect(tenants.count('a')).toBe(0);
    expect(tenants.tenants).toBe(0);
    expect(counts).toEqual([
      ['a', 1],
      ['a', 0],
    ]);
    // A stale second release cannot free another request's slot.
    const second = lease(tenants.admit('a'));
    first.release();
    expect(tenants.admit('a').kind).toBe('capped');
    second.release();
  });

  it('never leaks under random admit/release orders (each lease released once, some twice)', () => {
    const random = mulberry32(7);
    const tenants = new TenantInflight(3, () => 0);
    const held: { tenant: string; lease: TenantLease }[] = [];
    const expected = new Map<string, number>();
    for (let step = 0; step < 2000; step++) {
      const tenant = `t${Math.floor(random() * 4)}`;
      if (random() < 0.55) {
        const admission = tenants.admit(tenant);
        const count = expected.get(tenant) ?? 0;
        expect(admission.kind).toBe(count < 3 ? 'admitted' : 'capped');
        if (admission.kind === 'admitted') {
          held.push({ tenant, lease: admission.lease });
          expected.set(tenant, count + 1);
        }
      } else if (held.length > 0) {
        const [released] = held.splice(Math.floor(random() * held.length), 1);
        released!.lease.release();
        if (random() < 0.3) released!.lease.release();
        expected.set(released!.tenant, expected.get(released!.tenant)! - 1);
      }
      for (const t of ['t0', 't1', 't2', 't3']) expect(tenants.count(t)).toBe(expected.get(t) ?? 0);
    }
    for (const h of held) h.lease.release();
    expect(tenants.tenants).toBe(0);
  });

  it('answers Retry-After 1 s before any release, then the mean hold time over the cap in whole seconds, within 1..60', () => {
    let now = 0;
    const tenants = new TenantInflight(2, () => now);
    const a = lease(tenants.admit('a'));
    lease(tenants.admit('a'));
    expect(tenants.admit('a')).toEqual({ kind: 'capped', retryAfterS: 1 });
    now = 8_000;
    a.release(); // held 8 s
    lease(tenants.admit('a'));
    // 8 s mean hold over 2 in flight: one frees every 4 s.
    expect(tenants.admit('a')).toEqual({ kind: 'capped', retryAfterS: 4 });

    const slow = new TenantInflight(1, () => now);
    now = 0;
    const s = lease(slow.admit('s'));
    now = 3_600_000;
    s.release();
    lease(slow.admit('s'));
    expect(slow.admit('s')).toEqual({ kind: 'capped', retryAfterS: 60 });

    const fast = new TenantInflight(1, () => now);
    const f = lease(fast.admit('f'));
    now += 5;
    f.release();
    lease(fast.admit('f'));
    expect(fast.admit('f')).toEqual({ kind: 'capped', retryAfterS: 1 });
  });

  it('refuses a max that is not an integer >= 0', () => {
    expect(() => new TenantInflight(-1, () => 0)).toThrow(RangeError);
    expect(() => new TenantInflight(1.5, () => 0)).toThrow(RangeError);
  });
});
