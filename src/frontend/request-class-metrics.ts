/**
 * Request outcomes per priority class and per tenant, and each tenant's requests in flight:
 *
 *   dynamo_frontend_priority_class_requests_total{priority_class, outcome}
 *   dynamo_frontend_tenant_requests_total{tenant, outcome}
 *   dynamo_frontend_tenant_inflight_requests{tenant}
 *
 * outcome: served (the answer completed with a 2xx), overloaded (the overload status, 529),
 * tenant_capped (429, --tenant-max-inflight), error (anything else, the client leaving
 * included). Only requests whose class was resolved are counted here (a 400 for a bad priority
 * is not: dynamo_frontend_requests_total has it); anonymous requests only per class.
 *
 * Both labels are bounded: the class label is a configured key (or `default`), the tenant label
 * one of the first --metrics-max-tenants tenants seen, the rest `other` (BoundedLabels). The class
 * keys can come from the admin API too, so they get a BoundedLabels of their own as a backstop.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { BoundedLabels } from '../platform/metrics/bounded-labels.js';

export type ClassOutcome = 'served' | 'overloaded' | 'tenant_capped' | 'error';

/** Class labels kept before `other`: many lists of at most 16 keys (routing/priority-classes.ts). */
const MAX_CLASS_LABELS = 64;

export class RequestClassMetrics {
  private readonly classLabels = new BoundedLabels(MAX_CLASS_LABELS);
  private readonly tenantLabels: BoundedLabels;
  private readonly classRequests: Counter<'priority_class' | 'outcome'>;
  private readonly tenantRequests: Counter<'tenant' | 'outcome'>;
  private readonly tenantInflight: Gauge<'tenant'>;
  /** In-flight counts per tenant label (several tenants share `other`). */
  private readonly inflightByLabel = new Map<string, number>();
  /** Each tenant with a request in flight, and its count (forgotten at 0). */
  private readonly tenantCounts = new Map<string, number>();

  constructor(registry: Registry, maxTenants: number) {
    this.tenantLabels = new BoundedLabels(maxTenants);
    const registers = [registry];
    this.classRequests = new Counter({
      name: 'dynamo_frontend_priority_class_requests_total',
      help: 'OpenAI requests by priority class (the --priority-threshold-scale key, or "default") and outcome: served, overloaded (529), tenant_capped (429), error.',
      labelNames: ['priority_class', 'outcome'],
      registers,
    });
    this.tenantRequests = new Counter({
      name: 'dynamo_frontend_tenant_requests_total',
      help: 'OpenAI requests with a tenant (x-tenant-id or the body\'s user) by outcome; the first --metrics-max-tenants tenants seen have their own label, the rest "other".',
      labelNames: ['tenant', 'outcome'],
      registers,
    });
    this.tenantInflight = new Gauge({
      name: 'dynamo_frontend_tenant_inflight_requests',
      help: 'Requests of each tenant in flight at this frontend (what --tenant-max-inflight caps), from acceptance until the response ended.',
      labelNames: ['tenant'],
      registers,
    });
  }

  /** One request's outcome, counted once by its caller. */
  outcome(priorityClass: string, tenant: string | undefined, outcome: ClassOutcome): void {
    this.classRequests.inc({ priority_class: this.classLabels.label(priorityClass), outcome });
    if (tenant !== undefined) this.tenantRequests.inc({ tenant: this.tenantLabels.label(tenant), outcome });
  }

  /**
   * A tenant's in-flight count changed (TenantInflight's event). A tenant's label never changes
   * (BoundedLabels keeps a value's series for good, and once full stays full), so its change is
   * applied to that label's total.
   */
  tenantCount(tenant: string, count: number): void {
    const label = this.tenantLabels.label(tenant);
    const delta = count - (this.tenantCounts.get(tenant) ?? 0);
    if (count > 0) this.tenantCounts.set(tenant, count);
    else this.tenantCounts.delete(tenant);
    const total = (this.inflightByLabel.get(label) ?? 0) + delta;
    this.inflightByLabel.set(label, total);
    this.tenantInflight.set({ tenant: label }, total);
  }
}
