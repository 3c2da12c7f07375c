/**
 * The benchmark harness (bench/run.ts) in its --quick smoke configuration: every scenario runs
 * about a second against every target (two sidecar rows) and must produce numbers; the JSON must
 * be well formed (schema dynamo-sidecar-bench/2). Figures are not judged here (that is what
 * `npm run bench` is for).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const has = (cmd: string): boolean =>
  ['/usr/sbin', '/usr/bin', '/sbin', '/bin', ...(process.env['PATH'] ?? '').split(':')].some((d) => existsSync(join(d, cmd)));

interface Spread {
  median: number | null;
  min: number | null;
  max: number | null;
  n: number;
}
interface Row {
  target: string;
  rounds: (Record<string, number | null> | null)[];
  summary: Record<string, Spread>;
}
interface Scenario {
  id: string;
  rows: Row[];
  errors: string[];
  method: string[];
  warmups: { target: string; slices: (number | null)[]; settled: boolean | null }[];
  paired: { numerator: string; denominator: string; metric: string; perRound: (number | null)[]; summary: Spread }[];
  durationS: number;
}
interface BenchJson {
  schema: string;
  machine: { cores: number; node: string; affinity: string; versions: Record<string, string | null> };
  sidecars: { label: string; role: string; nodeVersion: string }[];
  scenarios: Scenario[];
  goals: { id: string; sidecar: string; met: boolean | null; measured: string }[];
}

function runBench(out: string, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // A second sidecar row on this same Node (--sidecar-node) exercises the multi-Node path without
    // fetching Node 24; the gate scenario is not in the default run, so it is asked for.
    const args = ['--quick', '--scenario', 'unary,streaming,overload,memory,gate', '--sidecar-node', process.execPath, '--out', out];
    const proc = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: REPO });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill('SIGTERM');
      reject(new Error(`bench --quick did not finish within ${timeoutMs} ms\n${stderr.slice(-3000)}`));
    }, timeoutMs);
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench --quick', () => {
  it('runs every scenario against every target and writes well-formed JSON with numbers', { timeout: 110_000 }, async () => {
    const out = join(dir, 'results.json');
    const { code, stdout, stderr } = await runBench(out, 100_000);
    expect(code, stderr.slice(-3000)).toBe(0);
    expect(stdout).toContain('== Goals');
    expect(stdout).toContain('== Summary table for docs/performance.md');

    const json = JSON.parse(readFileSync(out, 'utf8')) as BenchJson;
    expect(json.schema).toBe('dynamo-sidecar-bench/2');
    expect(json.machine.cores).toBeGreaterThan(0);
    expect(json.machine.node).toMatch(/^v\d+/);
    expect(json.machine.affinity).toBeTruthy();
    const second = `sidecar@node${process.version.slice(1)}`;
    expect(json.sidecars.map((s) => s.label)).toEqual(['sidecar', second]);

    const proxies = ['sidecar', second, ...(has('haproxy') ? ['haproxy'] : []), ...(has('nginx') ? ['nginx'] : [])];
    // For each scenario: the rows expected and the figures that must be positive numbers in each.
    const expected: Record<string, { rows: string[]; keys: string[]; proxyKeys: string[] }> = {
      unary: { rows: ['direct', ...proxies], keys: ['reqPerSec', 'p99Us'], proxyKeys: ['cpuUsPerCall'] },
      streaming: { rows: ['direct', ...proxies], keys: ['msgPerSec50', 'p50Us50', 'p99Us500'], proxyKeys: ['cpuUsPerMsg50', 'cpuUsPerMsg500'] },
      overload: { rows: proxies, keys: ['rejectedPerSec', 'rejectP99Us', 'cpuUsPerRejection'], proxyKeys: [] },
      memory: { rows: proxies, keys: ['rssSmallMB', 'rssBigMB'], proxyKeys: [] },
      gate: { rows: ['fast path', 'queue path'], keys: ['pairsPerSec'], proxyKeys: [] },
    };
    for (const [id, want] of Object.entries(expected)) {
      const scenario = json.scenarios.find((s) => s.id === id);
      expect(scenario, `scenario ${id}`).toBeDefined();
      expect(scenario!.errors, `${id} errors`).toEqual([]);
      expect(scenario!.method.length).toBeGreaterThan(0);
      expect(scenario!.durationS).toBeGreaterThan(0);
      expect(scenario!.rows.map((r) => r.target)).toEqual(want.rows);
      for (const name of want.rows) {
        const row = scenario!.rows.find((r) => r.target === name)!;
        expect(row.rounds).toHaveLength(1);
        const keys = name === 'direct' ? want.keys : [...want.keys, ...want.proxyKeys];
        for (const key of keys) {
          const s = row.summary[key];
          expect(s?.median, `${id}/${name} ${key}`).toBeGreaterThan(0);
          expect(s!.min).toBeLessThanOrEqual(s!.median!);
          expect(s!.max).toBeGreaterThanOrEqual(s!.median!);
        }
      }
    }
    // Every CPU-measured scenario warmed every target up first, with a series per proxy.
    for (const id of ['unary', 'streaming', 'overload']) {
      const scenario = json.scenarios.find((s) => s.id === id)!;
      expect(scenario.warmups.map((w) => w.target).sort()).toEqual(scenario.rows.map((r) => r.target).sort());
      for (const w of scenario.warmups.filter((x) => x.target !== 'direct')) expect(w.slices.length).toBeGreaterThanOrEqual(2);
    }
    // Paired figures: per round, then summarised; the goals' pairs exist for both sidecar rows.
    const streaming = json.scenarios.find((s) => s.id === 'streaming')!;
    if (has('haproxy')) {
      for (const name of ['sidecar', second]) {
        const p = streaming.paired.find((x) => x.numerator === name && x.denominator === 'haproxy' && x.metric === 'cpuUsPerMsg50');
        expect(p, `${name} / haproxy`).toBeDefined();
        expect(p!.perRound).toHaveLength(1);
        expect(p!.summary.median).toBeGreaterThan(0);
      }
    }
    expect(streaming.paired.some((x) => x.numerator === 'sidecar' && x.denominator === 'direct' && x.metric === 'p50Us50')).toBe(true);
    // Nine goals per sidecar row; with HAProxy installed the ones judged against it have a verdict.
    expect(json.goals).toHaveLength(18);
    for (const goal of json.goals) expect(goal.measured.length).toBeGreaterThan(0);
    if (has('haproxy')) for (const goal of json.goals.filter((g) => g.id.startsWith('stream-') || g.id.startsWith('unary-'))) expect(goal.met).not.toBeNull();
  });
});
