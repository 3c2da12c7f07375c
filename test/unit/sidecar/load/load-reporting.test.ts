// Load reporting composed from one LoadConfig, built but never started: its KV source, identity, events and metrics.
import { hostname } from 'node:os';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { AdmissionGate } from '../../../../src/sidecar/admission/gate.js';
import { parseSidecarConfig, type LoadConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { LoadReporting } from '../../../../src/sidecar/load/load-reporting.js';
import type { QuestionedEngine } from '../../../../src/sidecar/load/engine-question.js';
import { defaultWorkerId } from '../../../../src/sidecar/load/publisher.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const DEFAULTS: LoadConfig = parseSidecarConfig({}, {}).load;

/** Never asked in these tests: nothing is started. */
const engine: QuestionedEngine = {
  request: () => {
    throw new Error('the engine is not asked before start()');
  },
  reachable: false,
  onReachabilityChange: () => () => {},
  onReconnect: () => () => {},
};

function build(
  config: Partial<LoadConfig> = {},
  extra: { gate?: Partial<Record<'inEngine' | 'queued' | 'limit' | 'queueLimit', number> & { hasRoom: boolean }>; defaultEngineMetricsUrl?: string } = {},
) {
  const gate = { inEngine: 0, queued: 0, limit: Infinity, queueLimit: 0, hasRoom: true, ...extra.gate };
  const logger = recordingLogger();
  const registry = new Registry();
  const reporting = new LoadReporting({
    config: { ...DEFAULTS, servedModelName: 'm', ...config },
    gate: gate as unknown as AdmissionGate,
    listenPort: 9000,
    engine,
    defaultEngineMetricsUrl: extra.defaultEngineMetricsUrl,
    registry,
    logger,
  });
  return { reporting, gate, logger, registry };
}

describe('LoadReporting', () => {
  it.each([
    [{ engineLoadSource: 'auto', engineMetricsUrl: 'http://127.0.0.1:1/metrics' }, undefined, 'scrape'],
    [{ engineLoadSource: 'auto' }, 'http://127.0.0.1:1/metrics', 'scrape'],
    [{ engineLoadSource: 'auto' }, undefined, 'getloads'],
    [{ engineLoadSource: 'traffic', engineMetricsUrl: 'http://127.0.0.1:1/metrics' }, undefined, 'traffic'],
    [{ engineLoadSource: 'getloads', engineMetricsUrl: 'http://127.0.0.1:1/metrics' }, undefined, 'getloads'],
  ] as const)('with %j and default metrics URL %s reads KV load by %s', (config, defaultEngineMetricsUrl, kvSource) => {
    expect(build(config, defaultEngineMetricsUrl === undefined ? {} : { defaultEngineMetricsUrl }).reporting.kvSource).toBe(kvSource);
  });

  it('publishes on the subject of its namespace, component and endpoint', () => {
    expect(build({ namespace: 'ns', component: 'c', endpoint: 'e' }).reporting.subject).toBe('namespace.ns.component.c.endpoint.e.kv_metrics');
  });

  it('takes the configured worker id, and keeps it when bound', () => {
    const { reporting } = build({ workerId: 42 });
    expect(reporting.workerId).toBe(42);
    reporting.bound('10.0.0.1:5000', 5000);
    expect(reporting.workerId).toBe(42);
  });

  it('without a configured id hashes host and port, and rehashes with the port actually bound', () => {
    const { reporting } = build({ workerId: undefined });
    expect(reporting.workerId).toBe(defaultWorkerId(hostname(), 9000));
    reporting.bound('10.0.0.1:5000', 5000);
    expect(reporting.workerId).toBe(defaultWorkerId(hostname(), 5000));
    expect(reporting.current()[0]).toMatchObject({ worker_id: defaultWorkerId(hostname(), 5000), grpc_address: '10.0.0.1:5000' });
  });

  it('reports one event per rank with the configured model and heartbeat', () => {
    const events = build({ dataParallelSize: 2, loadHeartbeatMs: 500 }).reporting.current();
    expect(events.map((e) => e.dp_rank)).toEqual([0, 1]);
    expect(events.every((e) => e.model === 'm' && e.heartbeat_ms === 500)).toBe(true);
  });

  it("carries the gate's counts and limit, read at construction and on each sync", () => {
    const { reporting, gate } = build({}, { gate: { inEngine: 2, queued: 1, limit: 4, queueLimit: 8 } });
    expect(reporting.current()[0]).toMatchObject({ engine_request: 2, request_queue: 1, engine_request_limit: 4 });
    gate.inEngine = 4;
    gate.queued = 3;
    reporting.syncAdmission();
    expect(reporting.current()[0]).toMatchObject({ engine_request: 4, request_queue: 3 });
  });

  it('reports no limit while admission is off', () => {
    const { reporting, gate } = build({}, { gate: { limit: 4, queueLimit: 8 } });
    gate.limit = Infinity;
    reporting.admissionChanged();
    expect(reporting.current()[0]!.engine_request_limit).toBeNull();
  });

  it('marks the worker overloaded on a rejection, and draining when asked', () => {
    const { reporting } = build();
    expect(reporting.current()[0]).toMatchObject({ overloaded: false, draining: false });
    reporting.rejected();
    expect(reporting.current()[0]!.overloaded).toBe(true);
    reporting.setDraining();
    expect(reporting.current()[0]!.draining).toBe(true);
  });

  it('keeps a worker that refused with queue places left overloaded until the gate would admit a call at once', () => {
    const { reporting, gate } = build({}, { gate: { limit: 4, queueLimit: 4, inEngine: 4, queued: 1, hasRoom: false } });
    reporting.syncAdmission();
    reporting.rejected({ untilAdmittable: true });
    gate.queued = 0;
    reporting.syncAdmission();
    expect(reporting.current()[0]!.overloaded).toBe(true);
    gate.inEngine = 3;
    gate.hasRoom = true;
    reporting.syncAdmission();
    expect(reporting.current()[0]!.overloaded).toBe(false);
  });

  it('applies what the engine tells where no flag says otherwise: KV size, batched tokens, dp ranks, model', () => {
    const facts = { model: 'llama', kvTotalBlocks: 500, kvBlockSize: 32, maxNumBatchedTokens: 4096, dataParallelSize: 2 };
    const told = build({ servedModelName: undefined });
    told.reporting.applyEngineFacts(facts, true);
    expect(told.reporting.current().map((e) => [e.dp_rank, e.model, e.kv_total_blocks, e.max_num_batched_tokens])).toEqual([
      [0, 'llama', 500, 4096],
      [1, 'llama', 500, 4096],
    ]);
    const flags = build({
      servedModelName: 'mine',
      kvTotalBlocks: 100,
      maxNumBatchedTokens: 1024,
      dataParallelSize: 1,
      setByOperator: { kvBlockSize: true, dataParallelSize: true },
    });
    flags.reporting.applyEngineFacts(facts, true);
    expect(flags.reporting.current().map((e) => [e.dp_rank, e.model, e.kv_total_blocks, e.max_num_batched_tokens])).toEqual([[0, 'mine', 100, 1024]]);
  });

  it('warns once when the engine does not tell its model, and once when its dp ranks start above 0', () => {
    const { reporting, logger } = build({ servedModelName: undefined });
    reporting.applyEngineFacts({ dataParallelStartRank: 4 }, false);
    reporting.applyEngineFacts({ dataParallelStartRank: 4 }, true);
    reporting.applyEngineFacts({ dataParallelStartRank: 4 }, true);
    const warnings = logger.lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    expect(warnings).toEqual([expect.stringMatching(/first rank above 0/), expect.stringMatching(/did not tell its model/)]);
    expect(reporting.current()[0]!.model).toBeNull();
  });

  it('does not advance sequence numbers when read for GET /load', () => {
    const { reporting } = build();
    const first = reporting.current()[0]!.sequence;
    reporting.current();
    expect(reporting.current()[0]!.sequence).toBe(first);
  });

  it('warns that the frontend ignores --event-format dynamo, naming the subject and publisher id', () => {
    const { logger } = build({ natsServers: ['nats://127.0.0.1:4222'], eventFormat: 'dynamo' });
    const [line] = logger.lines.filter((l) => l.level === 'warn' && l.msg.startsWith('--event-format dynamo'));
    expect(line?.fields).toMatchObject({ subject: 'namespace.dynamo.component.backend.endpoint.generate.kv_metrics' });
    expect(typeof line?.fields['publisher_id']).toBe('number');
  });

  it('does not warn about the format with json, or without NATS', () => {
    expect(build({ natsServers: ['nats://127.0.0.1:4222'], eventFormat: 'json' }).logger.lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(build({ natsServers: undefined, eventFormat: 'dynamo' }).logger.lines.filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('registers the load metrics and the traffic accounting counters in the given registry', async () => {
    const { registry } = build();
    const text = await registry.metrics();
    expect(text).toContain('dynamo_sidecar_generate_unparsed_messages_total 0');
    expect(text).toContain('dynamo_sidecar_invalid_dp_rank_total 0');
    expect(registry.getMetricsAsArray().length).toBeGreaterThan(2);
  });

  it('has counted no output tokens before any traffic, and closes without having started', async () => {
    const { reporting } = build({ natsServers: ['nats://127.0.0.1:4222'] });
    expect(reporting.outputTokens).toBe(0);
    await expect(reporting.close()).resolves.toBeUndefined();
  });
});
