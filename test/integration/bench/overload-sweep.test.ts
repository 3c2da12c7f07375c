/**
 * The overload sweep (bench/overload-sweep.ts) at one point, 4x a given capacity, for the
 * unprotected system and the best configuration, as real processes: it must write its table,
 * JSON and plots, and the ordering that is its reason to exist must hold: under overload the
 * protected system serves more requests within the SLO than the unprotected one. Timings are
 * not judged (that is what `npm run bench:overload` is for).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-sweep-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Run {
  config: string;
  summary: { completed: number; rejected: number; slo?: { good: number; goodput_per_s: number }; ttft_ms: { p99: number | null } };
  wastedTokens: Record<string, number>;
}

function sweep(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/overload-sweep.ts', ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('npm run bench:overload, one point', () => {
  it('at 4x capacity on the heavy mix, the SLO alone serves more within it than auto alone, at a lower p99 TTFT, and writes its table, JSON and plots', async () => {
    const args = [
      '--capacity',
      '8',
      '--multiples',
      '4',
      '--point-s',
      '5',
      '--repeats',
      '1',
      '--configs',
      'auto,slo',
      '--mix',
      'heavy',
      '--grace-s',
      '2',
      '--out',
      out,
    ];
    const { code, output } = await sweep(args);
    expect(code, output.slice(-3000)).toBe(0);
    for (const file of ['overload.md', 'overload.json', 'goodput.svg', 'ttft-p99.svg']) expect(existsSync(join(out, file)), file).toBe(true);
    const { runs } = JSON.parse(readFileSync(join(out, 'overload.json'), 'utf8')) as { runs: Run[] };
    const run = (config: string): Run => runs.find((r) => r.config === config)!;
    const good = (config: string): number => run(config).summary.slo!.good;
    expect(runs.map((r) => r.config).sort()).toEqual(['auto', 'slo']);
    for (const each of runs) {
      expect(Object.keys(each.wastedTokens).sort()).toEqual(['cancelled', 'deadline', 'preempted']);
      for (const tokens of Object.values(each.wastedTokens)) expect(tokens).toBeGreaterThanOrEqual(0);
    }
    expect(readFileSync(join(out, 'overload.md'), 'utf8')).toContain('| wasted tok/s |');
    expect(run('slo').summary.rejected, 'the SLO refuses some of 4x').toBeGreaterThan(0);
    expect(good('slo'), `good requests: slo ${good('slo')}, auto ${good('auto')}`).toBeGreaterThan(good('auto'));
    const p99 = (config: string): number => run(config).summary.ttft_ms.p99 ?? Infinity;
    expect(p99('slo'), `p99 TTFT: slo ${p99('slo')} ms, auto ${p99('auto')} ms`).toBeLessThan(p99('auto'));
  }, 180_000);
});
