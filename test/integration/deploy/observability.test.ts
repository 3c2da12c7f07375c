/**
 * deploy/prometheus (alert rules and their unit tests) and deploy/grafana (the dashboard):
 * promtool checks and runs the rules, the dashboard has the shape Grafana imports and PromQL that
 * parses, and every metric either of them names exists in the /metrics of the real sidecar (in
 * front of the simulated engine, publishing to NATS) and the real frontend, so renaming a metric
 * fails here.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { startNatsServer } from '../../support/nats-server.js';
import { SystemUnderTest } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

const ROOT = new URL('../../../', import.meta.url);
const path = (relative: string): string => fileURLToPath(new URL(relative, ROOT));
const PROMETHEUS = path('deploy/prometheus/');
const hasPromtool = spawnSync('promtool', ['--version']).status === 0;

interface Target {
  refId: string;
  expr: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: unknown }[] };
}
interface RuleGroups {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string }[] }[];
}

const dashboard = JSON.parse(readFileSync(path('deploy/grafana/dynamo-sidecar.json'), 'utf8')) as Dashboard;
const alerts = parse(readFileSync(join(PROMETHEUS, 'alerts.yml'), 'utf8')) as RuleGroups;
const alertTests = parse(readFileSync(join(PROMETHEUS, 'alerts.test.yml'), 'utf8')) as { tests: { input_series: { series: string }[] }[] };
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Our metric names in a PromQL expression (each starts with dynamo_; label names and functions do not). */
const metricNames = (expr: string): string[] => [...expr.matchAll(/\bdynamo_[a-z0-9_]+/g)].map((m) => m[0]);
/** The dashboard's expression with Grafana's variables given values, so that promtool can parse it. */
const asPromql = (expr: string): string => expr.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*');

function promtool(...args: string[]): { status: number | null; output: string } {
  const result = spawnSync('promtool', args, { encoding: 'utf8', timeout: 30_000 });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('deploy/prometheus alert rules', () => {
  it.skipIf(!hasPromtool)('pass promtool check rules', () => {
    const result = promtool('check', 'rules', join(PROMETHEUS, 'alerts.yml'));
    expect(result.status, result.output).toBe(0);
  });

  it.skipIf(!hasPromtool)('pass their unit tests (promtool test rules), where each alert fires for its case and not for the others', () => {
    const result = promtool('test', 'rules', join(PROMETHEUS, 'alerts.test.yml'));
    expect(result.status, result.output).toBe(0);
  });

  it('cover sustained rejections, a saturated queue, engine down, stale engine load, NATS, stale load events and frontend 529s, each with a severity and a description', () => {
    const rules = alerts.groups.flatMap((g) => g.rules) as { alert: string; expr: string; labels?: { severity?: string }; annotations?: { summary?: string; description?: string } }[];
    expect(rules.map((r) => r.alert)).toEqual([
      'DynamoSidecarRejecting',
      'DynamoSidecarQueueSaturated',
      'DynamoSidecarUpstreamDown',
      'DynamoSidecarEngineScrapeStale',
      'DynamoSidecarNatsDisconnected',
      'DynamoSidecarLoadEventsStale',
      'DynamoFrontendRejecting',
    ]);
    for (const rule of rules) {
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toBeTruthy();
    }
    // Every alert has a unit-test case.
    const tested = readFileSync(join(PROMETHEUS, 'alerts.test.yml'), 'utf8');
    for (const rule of rules) expect(tested, rule.alert).toContain(`alertname: ${rule.alert}`);
  });
});

describe('deploy/grafana dashboard', () => {
  it('is a Grafana dashboard: uid, title, schemaVersion, a Prometheus datasource variable, panels on the 24-column grid without overlap', () => {
    expect(dashboard.uid).toBe('dynamo-sidecar');
    expect(dashboard.title).toBeTruthy();
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    const datasource = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(datasource).toMatchObject({ name: 'datasource', query: 'prometheus' });
    const ids = new Set<number>();
    for (const panel of dashboard.panels) {
      ids.add(panel.id);
      const { h, w, x, y } = panel.gridPos;
      for (const n of [h, w, x, y]) expect(Number.isInteger(n) && n >= 0, panel.title).toBe(true);
      expect(x + w, panel.title).toBeLessThanOrEqual(24);
      for (const other of dashboard.panels) {
        if (other === panel) continue;
        const o = other.gridPos;
        const overlaps = x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h;
        expect(overlaps, `${panel.title} overlaps ${other.title}`).toBe(false);
      }
    }
    expect(ids.size).toBe(dashboard.panels.length);
  });

  it('queries through the datasource variable only, each target with a refId and an expression', () => {
    for (const panel of dashboard.panels) {
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      const targets = panel.targets ?? [];
      expect(targets.length, panel.title).toBeGreaterThan(0);
      expect(new Set(targets.map((t) => t.refId)).size, panel.title).toBe(targets.length);
      for (const target of targets) {
        expect(target.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
        expect(target.expr.trim(), panel.title).not.toBe('');
      }
    }
  });

  it('shows slots vs limit, queue vs capacity, rejections, queue wait p50/p99, engine up, KV per rank, load events and frontend 529s by model', () => {
    const uses = (title: string, ...names: string[]) => {
      const panel = dashboard.panels.find((p) => p.title === title);
      expect(panel, title).toBeDefined();
      const exprs = (panel!.targets ?? []).map((t) => t.expr).join('\n');
      for (const name of names) expect(exprs, title).toContain(name);
      return exprs;
    };
    uses('Engine slots in use vs limit', 'dynamo_engine_request{', 'dynamo_sidecar_engine_request_limit');
    uses('Queue vs capacity', 'dynamo_request_queue{', 'dynamo_sidecar_request_queue_capacity');
    expect(uses('Rejections/s', 'dynamo_rejection_request_total')).toMatch(/^sum by \(instance\) \(rate\(/);
    const wait = uses('Queue wait p50 / p99', 'dynamo_sidecar_queue_wait_seconds_bucket');
    expect(wait).toContain('histogram_quantile(0.5,');
    expect(wait).toContain('histogram_quantile(0.99,');
    uses('Engine reachable', 'dynamo_sidecar_upstream_up');
    expect(uses('KV cache usage per dp rank', 'dynamo_component_gpu_cache_usage_percent')).toBeTruthy();
    expect(dashboard.panels.find((p) => p.title === 'KV cache usage per dp rank')!.targets![0]).toMatchObject({ legendFormat: expect.stringContaining('{{dp_rank}}') });
    uses('Load events published/s', 'dynamo_sidecar_load_events_published_total');
    expect(uses('Frontend 529s/s by model', 'dynamo_frontend_model_rejection_total')).toMatch(/^sum by \(model\)/);
  });

  it.skipIf(!hasPromtool)('has PromQL that parses (promtool check rules, each query as a recording rule)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-promql-'));
    try {
      const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: asPromql(q.expr) }));
      const file = join(dir, 'dashboard.rules.yml');
      writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
      const result = promtool('check', 'rules', file);
      expect(result.status, result.output).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('metric names in the dashboard and the alert rules', () => {
  const sys = new SystemUnderTest();
  const stops: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    await sys.stopAll();
    for (const stop of stops) await stop();
  });

  /** Series names an exposition can produce: each sample's name, and each TYPE's with its histogram/summary/counter suffixes. */
  function exposedNames(text: string): Set<string> {
    const names = new Set<string>();
    for (const line of text.split('\n')) {
      const type = /^# TYPE (\S+) (\S+)/.exec(line);
      if (type) {
        const [, name, kind] = type as unknown as [string, string, string];
        names.add(name);
        if (kind === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
        if (kind === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
        if (kind === 'counter' && !name.endsWith('_total')) names.add(`${name}_total`);
        continue;
      }
      const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
      if (sample) names.add(sample[1]!);
    }
    return names;
  }

  it("all exist in the real sidecar's and frontend's /metrics", async () => {
    const nats = await startNatsServer();
    stops.push(() => nats.stop());
    const worker = await sys.worker({ sidecar: ['--nats-url', nats.url], sidecarEnv: { DYN_ENGINE_REQUEST_LIMIT: '4' } });
    const frontend = await sys.frontend(['--nats-url', nats.url]);
    // The NATS-only series appear once the sidecar publishes; the frontend's once it routes.
    await waitFor(async () => (await worker.sidecar.metric('dynamo_sidecar_load_events_published_total')) > 0, 'a load event confirmed by NATS');
    await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to learn the worker over NATS');
    const res = await frontend.post('/v1/chat/completions', { model: worker.engine.model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 });
    expect(res.status, res.body).toBe(200);

    const exposed = new Set([...exposedNames(await worker.sidecar.metrics()), ...exposedNames((await frontend.get('/metrics')).body)]);
    const used = new Map<string, string>();
    for (const q of queries) for (const name of metricNames(q.expr)) used.set(name, `dashboard panel "${q.panel}"`);
    for (const group of alerts.groups) for (const rule of group.rules) for (const name of metricNames(rule.expr)) used.set(name, `alert ${rule.alert ?? rule.record}`);
    for (const test of alertTests.tests) for (const series of test.input_series) for (const name of metricNames(series.series)) used.set(name, 'alerts.test.yml');
    expect(used.size).toBeGreaterThan(10);
    const missing = [...used].filter(([name]) => !exposed.has(name)).map(([name, where]) => `${name} (${where})`);
    expect(missing).toEqual([]);
  });
});
