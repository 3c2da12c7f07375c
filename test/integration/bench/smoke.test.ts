/**
 * The benchmark harness (bench/run.ts) in its --quick smoke configuration: every scenario runs
 * about a second against every target and must produce numbers; the JSON must be well formed.
 * Figures are not judged here (that is what `npm run bench` is for).
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

interface Row {
  target: string;
  rounds: Record<string, number | null>[];
  median: Record<string, number | null>;
}
interface Scenario {
  id: string;
  rows: Row[];
  errors: string[];
  method: string[];
}
interface BenchJson {
  schema: string;
  machine: { cores: number; node: string; affinity: string; versions: Record<string, string | null> };
  scenarios: Scenario[];
  goals: { goal: string; met: boolean | null; measured: string }[];
}

function runBench(out: string, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--quick', '--out', out], { cwd: REPO });
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

    const json = JSON.parse(readFileSync(out, 'utf8')) as BenchJson;
    expect(json.schema).toBe('dynamo-sidecar-bench/1');
    expect(json.machine.cores).toBeGreaterThan(0);
    expect(json.machine.node).toMatch(/^v\d+/);
    expect(json.machine.affinity).toBeTruthy();

    const proxies = ['sidecar', ...(has('haproxy') ? ['haproxy'] : []), ...(has('nginx') ? ['nginx'] : [])];
    // For each scenario: the rows expected and one figure that must be a positive number in each.
    const expected: Record<string, { rows: string[]; key: string }> = {
      unary: { rows: ['direct', 'sidecar+admission', ...proxies], key: 'reqPerSec' },
      streaming: { rows: ['direct', ...proxies], key: 'floodMsgPerSec' },
      overload: { rows: proxies, key: 'rejectedPerSec' },
      memory: { rows: proxies, key: 'rssSmallMB' },
      gate: { rows: ['fast path', 'queue path'], key: 'pairsPerSec' },
    };
    for (const [id, want] of Object.entries(expected)) {
      const scenario = json.scenarios.find((s) => s.id === id);
      expect(scenario, `scenario ${id}`).toBeDefined();
      expect(scenario!.errors, `${id} errors`).toEqual([]);
      expect(scenario!.method.length).toBeGreaterThan(0);
      for (const name of want.rows) {
        const row = scenario!.rows.find((r) => r.target === name);
        expect(row, `${id}/${name}`).toBeDefined();
        expect(row!.rounds.length).toBeGreaterThanOrEqual(1);
        expect(row!.median[want.key], `${id}/${name} ${want.key}`).toBeGreaterThan(0);
      }
    }
    // Proxy CPU per request comes from /proc for every proxy, never for direct.
    const unary = json.scenarios.find((s) => s.id === 'unary')!;
    for (const name of proxies) expect(unary.rows.find((r) => r.target === name)!.median['cpuUsPerReq']).toBeGreaterThan(0);
    expect(json.goals.length).toBeGreaterThanOrEqual(4);
    for (const goal of json.goals) expect(goal.measured).toMatch(/\d/);
  });
});
