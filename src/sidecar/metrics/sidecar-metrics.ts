/**
 * The sidecar's Prometheus metrics. Dynamo's three names first (dynamo_engine_request,
 * dynamo_request_queue, dynamo_rejection_request_total), then our companions under
 * dynamo_sidecar_. Gauges that mirror the gate are read at scrape time (`collect`), so the hot
 * path pays nothing for them and they can never drift from the gate's own counts. The per-call
 * counters (calls by status, rejections) are plain numbers on the hot path, handed to
 * prom-client at scrape time too: its inc() hashes the label set on every call.
 */
import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import { CHANGE_SOURCES, type ChangeSource } from '../admission/admission-control.js';
import type { AdmissionGate } from '../admission/gate.js';
import { statusName } from '../../protocol/grpc/status.js';
import { BoundedLabels } from '../../platform/metrics/bounded-labels.js';
import type { CallClass } from '../admission/waiting-room.js';
import { DEFAULT_METRICS_MAX_TENANTS } from '../config/sidecar-config.js';

export type UpstreamErrorKind = 'connect' | 'reset' | 'session_lost';
/**
 * Why a call got RESOURCE_EXHAUSTED: engine and queue full on arrival, its expected queue wait too
 * long (--max-queue-wait-ms), queued past the queue timeout, its place in a full queue taken by
 * a more urgent call (or a tenant holding fewer places), or (--ttft-slo-ms) its predicted TTFT
 * over the SLO, mostly from waiting for KV room (kv_budget) or from the prefill ahead (predicted_ttft).
 */
const REJECTION_REASONS = ['queue_full', 'expected_wait', 'queue_timeout', 'displaced', 'kv_budget', 'predicted_ttft'] as const;
const CLASS_OUTCOMES = ['admitted', 'rejected'] as const;
type ClassOutcome = (typeof CLASS_OUTCOMES)[number];
export type RejectionReason = (typeof REJECTION_REASONS)[number];

export interface AdmissionView {
  /** N and Q are read from the gate at scrape time, so live changes show at once. */
  readonly gate: AdmissionGate;
  /** The pushback a refusal would carry now, before jitter. */
  readonly retryPushbackMs: () => number;
  /** Tenants, and priority values, with a series of their own (--metrics-max-tenants); the rest are `other`. */
  readonly maxLabelValues?: number;
}

export class SidecarMetrics {
  private readonly rejectionCounts = Object.fromEntries(REJECTION_REASONS.map((reason) => [reason, 0])) as Record<RejectionReason, number>;
  private readonly admissionChanges: Counter<'source'>;
  private readonly queueWait: Histogram;
  private readonly callsByStatus = new Map<number, number>();
  private readonly cancelledInQueue: Counter;
  private readonly deadlineInQueue: Counter;
  private readonly upstreamErrors: Counter<'kind'>;
  private readonly tenantLabels: BoundedLabels;
  private readonly priorityLabels: BoundedLabels;
  /** Calls by tenant label, priority label and outcome; plain numbers, handed to prom-client at scrape time. */
  private readonly classCounts = new Map<string, Map<string, Record<ClassOutcome, number>>>();

  constructor(
    readonly registry: Registry,
    admission: AdmissionView,
    upstreamReachable: () => boolean,
  ) {
    const registers = [registry];
    const { gate } = admission;
    this.tenantLabels = new BoundedLabels(admission.maxLabelValues ?? DEFAULT_METRICS_MAX_TENANTS);
    this.priorityLabels = new BoundedLabels(admission.maxLabelValues ?? DEFAULT_METRICS_MAX_TENANTS);
    const priorityLabels = this.priorityLabels;
    new Gauge({
      name: 'dynamo_engine_request',
      help: 'Calls currently inside the engine (admitted, not yet ended).',
      registers,
      collect() {
        this.set(gate.inEngine);
      },
    });
    new Gauge({
      name: 'dynamo_request_queue',
      help: 'Calls waiting in the sidecar for an engine slot.',
      registers,
      collect() {
        this.set(gate.queued);
      },
    });
    const rejections = this.rejectionCounts;
    new Counter({
      name: 'dynamo_rejection_request_total',
      help: 'Calls rejected with RESOURCE_EXHAUSTED (Server overloaded): engine and queue full, an expected queue wait too long, or queued past the queue timeout; by reason in dynamo_sidecar_rejections_total.',
      registers,
      collect() {
        this.reset();
        this.inc(REJECTION_REASONS.reduce((sum, reason) => sum + rejections[reason], 0));
      },
    });
    new Counter({
      name: 'dynamo_sidecar_rejections_total',
      help: 'Calls rejected with RESOURCE_EXHAUSTED, by reason: queue_full (engine and queue full on arrival), expected_wait (the expected queue wait exceeded --max-queue-wait-ms or the call deadline), queue_timeout (queued longer than the queue timeout), displaced (its place in the full queue went to a more urgent call, or to a tenant holding fewer places).',
      labelNames: ['reason'],
      registers,
      // Both series from the start (at 0), so rate() sees the first rejection.
      collect() {
        this.reset();
        for (const reason of REJECTION_REASONS) this.inc({ reason }, rejections[reason]);
      },
    });
    const classCounts = this.classCounts;
    new Counter({
      name: 'dynamo_sidecar_class_requests_total',
      help: 'Calls by priority (x-request-priority, or --default-priority) and tenant (x-tenant-id; "" for none) and outcome: admitted (reached an engine slot) or rejected (RESOURCE_EXHAUSTED, any reason). The first --metrics-max-tenants tenants, and priority values, seen get their own label; later ones are counted as "other".',
      labelNames: ['priority', 'tenant', 'outcome'],
      registers,
      collect() {
        this.reset();
        for (const [tenant, byPriority] of classCounts) {
          for (const [priority, counts] of byPriority) for (const outcome of CLASS_OUTCOMES) this.inc({ priority, tenant, outcome }, counts[outcome]);
        }
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_queued_requests',
      help: 'Calls waiting in the sidecar for an engine slot, by priority (the priority label bounded as in dynamo_sidecar_class_requests_total).',
      labelNames: ['priority'],
      registers,
      collect() {
        this.reset();
        for (const [priority, queued] of gate.queuedByPriority()) this.inc({ priority: priorityLabels.label(String(priority)) }, queued);
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_engine_request_limit',
      help: 'Max calls in the engine (N) in force; 0 means admission off.',
      registers,
      collect() {
        this.set(gate.limit === Infinity ? 0 : gate.limit);
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_request_queue_capacity',
      help: 'Overflow queue size (Q) in force; 0 when admission is off.',
      registers,
      collect() {
        this.set(gate.limit === Infinity ? 0 : gate.queueLimit);
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_engine_first_token_pending',
      help: 'Calls in the engine that have not had their first response message (first token) yet.',
      registers,
      collect() {
        this.set(gate.awaitingFirstToken);
      },
    });
    new Gauge({
      name: 'dynamo_sidecar_first_token_limit',
      help: 'The first-token limit (F) in force: most calls in the engine still awaiting their first token; 0 means none.',
      registers,
      collect() {
        this.set(gate.firstTokenLimit === Infinity ? 0 : gate.firstTokenLimit);
      },
    });
    this.admissionChanges = new Counter({
      name: 'dynamo_sidecar_admission_changes_total',
      help: 'Changes of the admission settings while running, by source: api (PUT /admission), sighup (the config file re-read), engine (its capacity from the engine, --engine-request-limit auto).',
      labelNames: ['source'],
      registers,
    });
    for (const source of CHANGE_SOURCES) this.admissionChanges.inc({ source }, 0);
    new Gauge({
      name: 'dynamo_sidecar_retry_pushback_seconds',
      help: 'grpc-retry-pushback-ms a refusal would carry now, in seconds: the fixed value, or the adaptive estimate before its jitter.',
      registers,
      collect() {
        this.set(admission.retryPushbackMs() / 1000);
      },
    });
    this.queueWait = new Histogram({
      name: 'dynamo_sidecar_queue_wait_seconds',
      help: 'Time calls spent in the overflow queue before reaching an engine slot.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    const callsByStatus = this.callsByStatus;
    new Counter({
      name: 'dynamo_sidecar_requests_total',
      help: 'Calls handled by the sidecar, by final gRPC status (from the engine or the sidecar).',
      labelNames: ['grpc_code'],
      registers,
      collect() {
        this.reset();
        for (const [status, calls] of callsByStatus) this.inc({ grpc_code: statusName(status) }, calls);
      },
    });
    this.cancelledInQueue = new Counter({
      name: 'dynamo_sidecar_queue_cancelled_total',
      help: 'Queued calls whose client cancelled before they reached the engine.',
      registers,
    });
    this.deadlineInQueue = new Counter({
      name: 'dynamo_sidecar_queue_deadline_exceeded_total',
      help: 'Queued calls whose deadline passed before they reached the engine.',
      registers,
    });
    this.upstreamErrors = new Counter({
      name: 'dynamo_sidecar_upstream_errors_total',
      help: 'Calls that failed between the sidecar and the engine, by kind.',
      labelNames: ['kind'],
      registers,
    });
    new Gauge({
      name: 'dynamo_sidecar_upstream_up',
      help: '1 while the engine is reachable over HTTP/2, else 0.',
      registers,
      collect() {
        this.set(upstreamReachable() ? 1 : 0);
      },
    });
    collectDefaultMetrics({ register: registry });
    // prom-client also exports these gauges with a _total suffix, which Prometheus reserves for
    // counters (promtool check metrics rejects them); the same values stay available without it.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      registry.removeSingleMetric(name);
    }
  }

  rejected(reason: RejectionReason, callClass?: CallClass): void {
    this.rejectionCounts[reason]++;
    if (callClass) this.classCountsOf(callClass).rejected++;
  }

  /** A call of this class reached an engine slot (at once or from the queue). */
  classAdmitted(callClass: CallClass): void {
    this.classCountsOf(callClass).admitted++;
  }

  private classCountsOf(callClass: CallClass): Record<ClassOutcome, number> {
    const tenant = this.tenantLabels.label(callClass.tenant);
    const priority = this.priorityLabels.label(String(callClass.priority));
    let byPriority = this.classCounts.get(tenant);
    if (!byPriority) this.classCounts.set(tenant, (byPriority = new Map<string, Record<ClassOutcome, number>>()));
    let counts = byPriority.get(priority);
    if (!counts) byPriority.set(priority, (counts = { admitted: 0, rejected: 0 }));
    return counts;
  }

  admissionChanged(source: ChangeSource): void {
    this.admissionChanges.inc({ source });
  }

  admittedFromQueue(waitSeconds: number): void {
    this.queueWait.observe(waitSeconds);
  }

  cancelledWhileQueued(): void {
    this.cancelledInQueue.inc();
  }

  deadlineWhileQueued(): void {
    this.deadlineInQueue.inc();
  }

  upstreamError(kind: UpstreamErrorKind): void {
    this.upstreamErrors.inc({ kind });
  }

  /** One per call, with its final status. */
  callEnded(status: number): void {
    this.callsByStatus.set(status, (this.callsByStatus.get(status) ?? 0) + 1);
  }
}
