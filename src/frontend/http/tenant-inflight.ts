/**
 * Per-tenant in-flight counts at this frontend, and the cap (--tenant-max-inflight): a
 * transport-free primitive with one invariant, count(tenant) = leases acquired and not yet
 * released. A lease is taken when the request is accepted and released once however the
 * response ends (done, error, client gone: the HTTP layer releases on the response's `close`);
 * release() is idempotent, so a second end cannot make a count negative. A tenant at 0 is
 * forgotten, so memory follows the requests in flight, not the tenants ever seen.
 *
 * Retry-After for a refused tenant: a slot frees when one of its N in-flight requests ends. With
 * their start times spread evenly, one ends every H / N on average, H being how long requests
 * hold a slot here; H is a moving average (EWMA, weight 0.2) of the hold times of released
 * leases, every tenant's (a tenant's own history may be a single request). Whole seconds, at
 * least 1 (an answer of 0 invites an immediate retry storm), at most 60; 1 before any release.
 */
export interface TenantLease {
  /** Idempotent. */
  release(): void;
}

export interface TenantInflightEvents {
  /** The tenant's count changed (metrics keep a gauge of it). */
  onCount?(tenant: string, count: number): void;
}

export type TenantAdmission = { readonly kind: 'admitted'; readonly lease: TenantLease } | { readonly kind: 'capped'; readonly retryAfterS: number };

const EWMA_WEIGHT = 0.2;
const MAX_RETRY_AFTER_S = 60;

export class TenantInflight {
  private readonly counts = new Map<string, number>();
  private meanHoldMs: number | undefined;

  /** `max` 0: no cap (the counts are still kept, for the gauge). `monotonicMs`: the clock of hold times. */
  constructor(
    readonly max: number,
    private readonly monotonicMs: () => number,
    private readonly events: TenantInflightEvents = {},
  ) {
    if (!(Number.isSafeInteger(max) && max >= 0)) throw new RangeError(`tenant max in flight must be an integer >= 0, got ${max}`);
  }

  /** Takes a slot for `tenant`, or says it is at its cap. */
  admit(tenant: string): TenantAdmission {
    const count = this.counts.get(tenant) ?? 0;
    if (this.max > 0 && count >= this.max) return { kind: 'capped', retryAfterS: this.retryAfterS(count) };
    this.setCount(tenant, count + 1);
    const startMs = this.monotonicMs();
    let released = false;
    return {
      kind: 'admitted',
      lease: {
        release: () => {
          if (released) return;
          released = true;
          const holdMs = Math.max(0, this.monotonicMs() - startMs);
          this.meanHoldMs = this.meanHoldMs === undefined ? holdMs : this.meanHoldMs + EWMA_WEIGHT * (holdMs - this.meanHoldMs);
          this.setCount(tenant, (this.counts.get(tenant) ?? 1) - 1);
        },
      },
    };
  }

  count(tenant: string): number {
    return this.counts.get(tenant) ?? 0;
  }

  /** Tenants with a request in flight. */
  get tenants(): number {
    return this.counts.size;
  }

  private retryAfterS(inflight: number): number {
    if (this.meanHoldMs === undefined) return 1;
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(this.meanHoldMs / inflight / 1000)));
  }

  private setCount(tenant: string, count: number): void {
    if (count <= 0) this.counts.delete(tenant);
    else this.counts.set(tenant, count);
    this.events.onCount?.(tenant, Math.max(0, count));
  }
}
