/**
 * The overload benchmark's classes and tenants scenarios (bench/overload/) at a tiny scale, as real
 * processes: each must write its table, verdicts, JSON and plots, send what it says it sends (the
 * noisy tenant meets the frontend's in-flight cap: 429, counted apart from 529), and keep the
 * summaries per class and per tenant apart. Timings and goals are not judged (that is what
 * `npm run bench:overload -- --scenario ...` is for).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'dynamo-sidecar-scenarios-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Summary {
  sent: number;
  rejected: number;
  tenant_capped?: number;
  slo?: { good: number };
}

function bench(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/overload-sweep.ts', ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('npm run bench:overload -- --scenario classes|tenants, tiny', () => {
  it('classes: runs both configurations at one point, each class summarised apart, and writes its table, verdicts, JSON and plots', async () => {
    const dir = join(out, 'classes');
    const args = ['--scenario', 'classes', '--capacity', '8', '--multiples', '2', '--point-s', '2', '--repeats', '1', '--grace-s', '1', '--out', dir];
    const { code, output } = await bench(args);
    expect(code, output.slice(-3000)).toBe(0);
    for (const file of ['classes.md', 'classes.json', 'classes-goodput.svg', 'classes-high-share.svg']) expect(existsSync(join(dir, file)), file).toBe(true);
    const { runs, verdicts } = JSON.parse(readFileSync(join(dir, 'classes.json'), 'utf8')) as {
      runs: { config: string; classes: { high: Summary; low: Summary } }[];
      verdicts: { text: string }[];
    };
    expect(runs.map((r) => r.config)).toEqual(['best', 'best+priority']);
    for (const run of runs) {
      // 2x of 8/s for 2 s: about 6 high and 26 low requests (Poisson).
      expect(run.classes.high.sent).toBeGreaterThan(0);
      expect(run.classes.low.sent).toBeGreaterThan(run.classes.high.sent);
    }
    expect(verdicts.map((v) => v.text.split(':')[0])).toEqual(['best', 'best+priority']);
    expect(readFileSync(join(dir, 'classes.md'), 'utf8')).toContain('| offered | config | class |');
  }, 70_000);

  it('tenants: the noisy tenant meets the in-flight cap (429, apart from 529) with fairness, and the run without it has only the polite ones', async () => {
    const dir = join(out, 'tenants');
    // The sidecars admit every call (N 64 each, no first-token limit, no expected-wait refusal), so
    // nothing ends a noisy request early: each stays in flight for its whole generation (64 tokens,
    // over a second at the engine's fastest), and the noisy tenant offers 16/s. A slower machine
    // only makes requests last longer, so more of them overlap and the cap of 8 is met sooner.
    const args = [
      ...['--scenario', 'tenants', '--capacity', '8', '--configs', 'best+fairness', '--fairness-args=--engine-request-limit 64'],
      ...['--point-s', '2', '--repeats', '1', '--grace-s', '1', '--out', dir],
    ];
    const { code, output } = await bench(args);
    expect(code, output.slice(-3000)).toBe(0);
    for (const file of ['tenants.md', 'tenants.json', 'tenants-polite-goodput.svg']) expect(existsSync(join(dir, file)), file).toBe(true);
    const { runs } = JSON.parse(readFileSync(join(dir, 'tenants.json'), 'utf8')) as {
      runs: { withNoisy: boolean; tenants: { tenant: string; polite: boolean; summary: Summary }[] }[];
    };
    expect(runs.map((r) => [r.withNoisy, r.tenants.length])).toEqual([
      [false, 4],
      [true, 5],
    ]);
    const noisy = runs[1]!.tenants.find((t) => !t.polite)!.summary;
    expect(noisy.tenant_capped, JSON.stringify(noisy)).toBeGreaterThan(0);
    expect(noisy.rejected).toBeGreaterThanOrEqual(noisy.tenant_capped!);
    expect(readFileSync(join(dir, 'tenants.md'), 'utf8')).toMatch(/best\+fairness: the polite tenants' goodput drops by/);
  }, 70_000);
});
