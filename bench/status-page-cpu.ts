/**
 * What an open status page costs the frontend: the frontend process's CPU seconds over equal
 * windows with no page open, then with 1 and with 5 pages open (a real headless chromium on
 * /status), then closed again, all under the same open-loop load. Real processes from dist/: two
 * simulated engines (the demo's preset), two sidecars, the frontend, the load client.
 *
 *   npm run build && node --import tsx bench/status-page-cpu.ts [--window-s 60] [--rate 20] [--pages 1,5] [--json]
 *
 * CPU is the frontend's on-CPU time from /proc (bench/lib/proc.ts: per-thread schedstat, with
 * utime+stime as a cross-check). Needs chromium (bash .ci/setup.sh installs it).
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { launchBrowser } from '../test/support/browser.js';
import { DEFAULT_PRESET, engineArgs } from './lib/overload-system.js';
import { SIDECAR_MAIN } from './lib/paths.js';
import { cpuBetween, cpuSampler } from './lib/proc.js';
import { localSidecarEnv, sleep, spawnProcess, stopAll } from './lib/spawn.js';

const { values } = parseArgs({
  options: {
    'window-s': { type: 'string', default: '60' },
    rate: { type: 'string', default: '20' },
    pages: { type: 'string', default: '1,5' },
    json: { type: 'boolean', default: false },
  },
});
const windowS = Number(values['window-s']);
const pageCounts = values.pages.split(',').map(Number);
if (!existsSync(SIDECAR_MAIN)) throw new Error('dist/ is missing: run npm run build first');

const node = (name: string, args: string[], env?: NodeJS.ProcessEnv) => spawnProcess(name, process.execPath, [SIDECAR_MAIN, ...args], env ? { env } : {});

async function main(): Promise<void> {
  const workers: string[] = [];
  for (let i = 0; i < 2; i++) {
    const engine = node(`engine${i}`, [...engineArgs(DEFAULT_PRESET), '--seed', String(i)]);
    const [, grpc, metrics] = await engine.waitFor(/simulated engine ready grpc=(\S+) metrics=(\S+)/, 20_000);
    const sidecar = node(
      `sidecar${i}`,
      ['--upstream', grpc!, '--engine-metrics-url', metrics!, '--worker-id', String(i + 1)],
      localSidecarEnv({ DYN_ENGINE_REQUEST_LIMIT: '12', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4' }),
    );
    const [, host, port] = await sidecar.waitFor(/listening on (\S+):(\d+)/, 20_000);
    workers.push(`${host}:${port}`);
  }
  const frontend = node('frontend', [
    'frontend',
    '--http-host',
    '127.0.0.1',
    '--http-port',
    '0',
    ...workers.flatMap((w) => ['--worker', w]),
    '--active-decode-blocks-threshold',
    '0.3',
  ]);
  const [, port] = await frontend.waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/, 20_000);
  const url = `http://127.0.0.1:${port}`;
  const phases = ['closed', ...pageCounts.map((n) => `${n} page${n > 1 ? 's' : ''} open`), 'closed again'];
  const totalS = phases.length * (windowS + 3) + 15;
  node('load', ['load', '--openai', url, '--rate', values.rate, '--duration-s', String(totalS), '--max-tokens', '32']);
  const browser = await launchBrowser();
  const cpu = cpuSampler(frontend.pid);
  await sleep(5000);
  const results: { phase: string; pages: number; cpuS: number; tickS: number; percentOfCore: number }[] = [];
  const pages: Page[] = [];
  for (const phase of phases) {
    const want = phase.startsWith('closed') ? 0 : Number.parseInt(phase, 10);
    while (pages.length > want) await pages.pop()!.close();
    while (pages.length < want) {
      const page = await browser.context.newPage();
      await page.goto(`${url}/status`);
      await page.locator('tr[data-worker-id]').first().waitFor({ timeout: 10_000 });
      pages.push(page);
    }
    await sleep(3000);
    const start = cpu();
    await sleep(windowS * 1000);
    const used = cpuBetween(start, cpu());
    results.push({ phase, pages: want, cpuS: round(used.seconds), tickS: round(used.tickSeconds), percentOfCore: round((used.seconds / windowS) * 100) });
    if (!values.json)
      console.log(
        `${phase.padEnd(14)} frontend CPU ${used.seconds.toFixed(3)} s over ${windowS} s (${((used.seconds / windowS) * 100).toFixed(2)} % of a core; ticks ${used.tickSeconds.toFixed(2)} s)`,
      );
  }
  await browser.close();
  if (values.json) console.log(JSON.stringify({ windowS, rate: Number(values.rate), results }, null, 2));
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

try {
  await main();
} finally {
  await stopAll();
}
