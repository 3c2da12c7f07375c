// The sidecar's Prometheus metrics on a fresh registry per test: gate mirrors read at scrape time, hot-path counts handed over at scrape.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { AdmissionGate } from '../../../../src/sidecar/admission/gate.js';
import { SidecarMetrics } from '../../../../src/sidecar/metrics/sidecar-metrics.js';

/** The gate readings the metrics mirror, settable by the test. */
interface GateReadings {
  inEngine: number;
  queued: number;
  limit: number;
  queueLimit: number;
  awaitingFirstToken: number;
  firstTokenLimit: number;
  byPriority: [number, number][];
}

function setup(readings: Partial<GateReadings> = {}, maxLabelValues?: number) {
  const gate: GateReadings = { inEngine: 0, queued: 0, limit: 4, queueLimit: 8, awaitingFirstToken: 0, firstTokenLimit: Infinity, byPriority: [], ...readings };
  const gateView = Object.assign(gate, { queuedByPriority: () => gate.byPriority });
  const state = { pushbackMs: 250, reachable: true };
  const registry = new Registry();
  const metrics = new SidecarMetrics(
    registry,
    { gate: gateView as unknown as AdmissionGate, retryPushbackMs: () => state.pushbackMs, ...(maxLabelValues === undefined ? {} : { maxLabelValues }) },
    () => state.reachable,
  );
  const values = async (name: string) => {
    const metric = registry.getSingleMetric(name);
    if (metric === undefined) throw new Error(`no metric ${name}`);
    return (await metric.get()).values.map(({ labels, value }) => ({ labels, value }));
  };
  const value = async (name: string) => (await values(name))[0]?.value;
  return { gate, state, registry, metrics, values, value };
}

describe('SidecarMetrics', () => {
  it("mirrors the gate's counts at each scrape", async () => {
    const { gate, value } = setup({ inEngine: 3, queued: 1 });
    expect(await value('dynamo_engine_request')).toBe(3);
    expect(await value('dynamo_request_queue')).toBe(1);
    gate.inEngine = 0;
    gate.queued = 5;
    expect(await value('dynamo_engine_request')).toBe(0);
    expect(await value('dynamo_request_queue')).toBe(5);
  });

  it('shows N and Q in force, and 0 for both while admission is off', async () => {
    const { gate, value } = setup({ limit: 4, queueLimit: 8 });
    expect(await value('dynamo_sidecar_engine_request_limit')).toBe(4);
    expect(await value('dynamo_sidecar_request_queue_capacity')).toBe(8);
    gate.limit = Infinity;
    expect(await value('dynamo_sidecar_engine_request_limit')).toBe(0);
    expect(await value('dynamo_sidecar_request_queue_capacity')).toBe(0);
  });

  it('shows the calls awaiting their first token and F in force, 0 when there is none', async () => {
    const { gate, value } = setup({ awaitingFirstToken: 2, firstTokenLimit: 3 });
    expect(await value('dynamo_sidecar_engine_first_token_pending')).toBe(2);
    expect(await value('dynamo_sidecar_first_token_limit')).toBe(3);
    gate.firstTokenLimit = Infinity;
    expect(await value('dynamo_sidecar_first_token_limit')).toBe(0);
  });

  it("counts rejections by reason, every series from 0, and their sum under Dynamo's name", async () => {
    const { metrics, values, value } = setup();
    expect(await values('dynamo_sidecar_rejections_total')).toEqual([
      { labels: { reason: 'queue_full' }, value: 0 },
      { labels: { reason: 'expected_wait' }, value: 0 },
      { labels: { reason: 'queue_timeout' }, value: 0 },
      { labels: { reason: 'displaced' }, value: 0 },
      { labels: { reason: 'kv_budget' }, value: 0 },
      { labels: { reason: 'predicted_ttft' }, value: 0 },
    ]);
    expect(await value('dynamo_rejection_request_total')).toBe(0);
    metrics.rejected('queue_full');
    metrics.rejected('queue_full');
    metrics.rejected('expected_wait');
    metrics.rejected('queue_timeout');
    metrics.rejected('displaced');
    metrics.rejected('kv_budget');
    metrics.rejected('predicted_ttft');
    expect(await values('dynamo_sidecar_rejections_total')).toEqual([
      { labels: { reason: 'queue_full' }, value: 2 },
      { labels: { reason: 'expected_wait' }, value: 1 },
      { labels: { reason: 'queue_timeout' }, value: 1 },
      { labels: { reason: 'displaced' }, value: 1 },
      { labels: { reason: 'kv_budget' }, value: 1 },
      { labels: { reason: 'predicted_ttft' }, value: 1 },
    ]);
    expect(await value('dynamo_rejection_request_total')).toBe(7);
  });

  it('counts calls by priority, tenant and outcome, the first k tenants and priorities by name and the rest as other', async () => {
    const { metrics, values } = setup({}, 2);
    expect(await values('dynamo_sidecar_class_requests_total')).toEqual([]);
    metrics.classAdmitted({ priority: 0, tenant: 'a' });
    metrics.classAdmitted({ priority: 0, tenant: 'a' });
    metrics.rejected('displaced', { priority: 5, tenant: 'a' });
    metrics.classAdmitted({ priority: 0, tenant: '' });
    metrics.rejected('queue_full', { priority: 9, tenant: 'b' }); // a third tenant, a third priority: both other
    metrics.rejected('queue_full', { priority: 7, tenant: 'c' });
    const series = await values('dynamo_sidecar_class_requests_total');
    const count = (priority: string, tenant: string, outcome: string) =>
      series.find((s) => s.labels.priority === priority && s.labels.tenant === tenant && s.labels.outcome === outcome)?.value;
    expect(count('0', 'a', 'admitted')).toBe(2);
    expect(count('5', 'a', 'rejected')).toBe(1);
    expect(count('0', '', 'admitted')).toBe(1);
    expect(count('other', 'other', 'rejected')).toBe(2);
    expect(new Set(series.map((s) => s.labels.tenant))).toEqual(new Set(['a', '', 'other']));
    expect(new Set(series.map((s) => s.labels.priority))).toEqual(new Set(['0', '5', 'other']));
  });

  it('shows the calls queued per priority at each scrape', async () => {
    const { gate, values } = setup({
      byPriority: [
        [-1, 2],
        [0, 3],
      ],
    });
    expect(await values('dynamo_sidecar_queued_requests')).toEqual([
      { labels: { priority: '-1' }, value: 2 },
      { labels: { priority: '0' }, value: 3 },
    ]);
    gate.byPriority = [[0, 1]];
    expect(await values('dynamo_sidecar_queued_requests')).toEqual([{ labels: { priority: '0' }, value: 1 }]);
  });

  it('counts calls by the name of their final gRPC status', async () => {
    const { metrics, values } = setup();
    expect(await values('dynamo_sidecar_requests_total')).toEqual([]);
    metrics.callEnded(0);
    metrics.callEnded(0);
    metrics.callEnded(8);
    expect(await values('dynamo_sidecar_requests_total')).toEqual([
      { labels: { grpc_code: 'OK' }, value: 2 },
      { labels: { grpc_code: 'RESOURCE_EXHAUSTED' }, value: 1 },
    ]);
  });

  it('counts live admission changes by source, each from 0', async () => {
    const { metrics, values } = setup();
    metrics.admissionChanged('sighup');
    metrics.admissionChanged('engine');
    expect(await values('dynamo_sidecar_admission_changes_total')).toEqual([
      { labels: { source: 'api' }, value: 0 },
      { labels: { source: 'sighup' }, value: 1 },
      { labels: { source: 'engine' }, value: 1 },
    ]);
  });

  it('shows the current retry pushback in seconds', async () => {
    const { state, value } = setup();
    expect(await value('dynamo_sidecar_retry_pushback_seconds')).toBe(0.25);
    state.pushbackMs = 1500;
    expect(await value('dynamo_sidecar_retry_pushback_seconds')).toBe(1.5);
  });

  it('observes queue waits into the histogram', async () => {
    const { metrics, values } = setup();
    metrics.admittedFromQueue(0.003);
    metrics.admittedFromQueue(2);
    const series = await values('dynamo_sidecar_queue_wait_seconds');
    const bucket = (le: number) => series.find((s) => s.labels['le'] === le)?.value;
    expect(bucket(0.001)).toBe(0);
    expect(bucket(0.005)).toBe(1);
    expect(bucket(2.5)).toBe(2);
    expect(series.find((s) => s.labels['le'] === undefined && s.value === 2.003)).toBeDefined();
  });

  it('counts calls that left the queue cancelled or past their deadline, and upstream errors by kind', async () => {
    const { metrics, value, values } = setup();
    metrics.cancelledWhileQueued();
    metrics.deadlineWhileQueued();
    metrics.deadlineWhileQueued();
    metrics.upstreamError('reset');
    metrics.upstreamError('connect');
    metrics.upstreamError('reset');
    expect(await value('dynamo_sidecar_queue_cancelled_total')).toBe(1);
    expect(await value('dynamo_sidecar_queue_deadline_exceeded_total')).toBe(2);
    expect(await values('dynamo_sidecar_upstream_errors_total')).toEqual([
      { labels: { kind: 'reset' }, value: 2 },
      { labels: { kind: 'connect' }, value: 1 },
    ]);
  });

  it('shows whether the engine is reachable', async () => {
    const { state, value } = setup();
    expect(await value('dynamo_sidecar_upstream_up')).toBe(1);
    state.reachable = false;
    expect(await value('dynamo_sidecar_upstream_up')).toBe(0);
  });

  it("adds the process metrics to its own registry, without prom-client's gauges named like counters", async () => {
    const { registry } = setup();
    const text = await registry.metrics();
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('nodejs_active_handles ');
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      expect(registry.getSingleMetric(name)).toBeUndefined();
    }
  });

  it('keeps two instances apart: each registry sees only its own counts', async () => {
    const a = setup();
    const b = setup();
    a.metrics.rejected('queue_full');
    expect(await a.value('dynamo_rejection_request_total')).toBe(1);
    expect(await b.value('dynamo_rejection_request_total')).toBe(0);
  });
});
