/**
 * What a NATS outage costs the request path: the sidecar keeps serving at the same latency and
 * holds no growing backlog while its broker is gone (load events are dropped and counted, not
 * queued). Each round starts a fresh nats-server, the simulated engine and the real sidecar
 * (dist/cli/main.js), runs the same closed-loop load with the broker up and then killed, and
 * reads TTFT from the load client and the sidecar's RSS from /proc. The two phases of a round
 * run back to back on the same processes, so the ratio compares like with like.
 *
 *   npx tsc -p tsconfig.json && node --import tsx bench/nats-outage.ts [--rounds 3] [--phase-s 3]
 *       [--concurrency 8] [--svg bench/results/nats-outage.svg]
 *
 * Prints one table row per round and a summary (median [min..max] over rounds); writes the plot.
 * Goal: TTFT p50 during the outage within 2x + 20 ms of before, RSS growth under 64 MiB, no
 * load event published while the broker is down, and events received within 100 ms (median)
 * of being built while it is up. Exit 1 when a goal is missed.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from '@nats-io/transport-node';
import type { LoadEvent } from '../src/protocol/load-event.js';
import { startSimulatedEngine } from '../src/tools/engine/index.js';
import { runLoad } from '../src/tools/load/run.js';
import { REPO_ROOT, SIDECAR_MAIN } from './lib/paths.js';
import { rssBytes } from './lib/proc.js';
import { freePort, spawnProcess, stopAll, waitForPort, localSidecarEnv } from './lib/spawn.js';
import { median, spread, type Spread } from './lib/stats.js';
import { writeBarChart } from './report/svg.js';
import { formatNumber, formatSpread, renderTable } from './report/table.js';

const HELP = `usage: node --import tsx bench/nats-outage.ts [options]
  --rounds N        rounds, each a fresh broker, engine and sidecar (default 3)
  --phase-s S       seconds of load with the broker up, then as long with it down (default 3)
  --concurrency C   closed-loop callers (default 8)
  --svg FILE        where the plot goes (default bench/results/nats-outage.svg)`;

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    'phase-s': { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '8' },
    svg: { type: 'string', default: 'bench/results/nats-outage.svg' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const rounds = Number(values.rounds);
const phaseS = Number(values['phase-s']);
const concurrency = Number(values.concurrency);
if (!Number.isInteger(rounds) || rounds < 1 || !(phaseS >= 0.5) || !Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`bad option\n${HELP}`);
  process.exit(2);
}

interface Round {
  readonly p50Up: number;
  readonly p50Down: number;
  readonly p99Up: number;
  readonly p99Down: number;
  readonly completedDown: number;
  readonly failedDown: number;
  readonly rssGrowthMiB: number;
  readonly publishedWhileDown: number;
  /** Median ms from an event's timestamp_ms (taken when it is built) to its arrival at a subscriber, broker up. */
  readonly publishToReceiveMs: number;
}

const progress = (message: string): void => void process.stderr.write(`[nats-outage] ${message}\n`);

async function metric(systemPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${systemPort}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const hit = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  if (!hit) throw new Error(`${name} not in the sidecar's /metrics`);
  return Number(hit[1]);
}

async function waitForMetric(systemPort: number, name: string, want: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while ((await metric(systemPort, name)) !== want) {
    if (Date.now() > until) throw new Error(`${name} did not reach ${want} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function oneRound(index: number): Promise<Round> {
  const natsPort = await freePort();
  const broker = spawnProcess('nats-server', 'nats-server', ['-a', '127.0.0.1', '-p', String(natsPort)]);
  await waitForPort(natsPort, 10_000, broker);
  const engine = await startSimulatedEngine({ host: '127.0.0.1', port: 0, metricsPort: 0, decodeStepMs: 2, prefillTokensPerS: 1_000_000 });
  try {
    const sidecar = spawnProcess('sidecar', process.execPath, [SIDECAR_MAIN, '--upstream', engine.address, '--engine-request-limit', '16'], {
      cwd: REPO_ROOT,
      env: localSidecarEnv({
        DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '16',
        NATS_SERVER: `nats://127.0.0.1:${natsPort}`,
        DYN_LOAD_HEARTBEAT_MS: '200',
        DYN_LOG_LEVEL: 'error',
      }),
    });
    const listening = await sidecar.waitFor(/listening on \S+:(\d+), upstream .*, system port (\d+)/, 15_000);
    const target = `127.0.0.1:${listening[1]}`;
    const systemPort = Number(listening[2]);
    await waitForMetric(systemPort, 'dynamo_sidecar_nats_connected', 1, 10_000);
    const subscriber = await connect({ servers: `127.0.0.1:${natsPort}` });
    const delays: number[] = [];
    subscriber.subscribe('>', { callback: (_err, msg) => void delays.push(Date.now() - msg.json<LoadEvent>().timestamp_ms) });
    await subscriber.flush();
    const load = { target, concurrency, promptTokens: { min: 8, max: 64 }, maxTokens: { min: 2, max: 8 }, graceS: 10 } as const;
    progress(`round ${index + 1}/${rounds}: warm-up`);
    await runLoad({ ...load, durationS: phaseS });
    progress(`round ${index + 1}/${rounds}: ${phaseS} s with the broker up`);
    const up = await runLoad({ ...load, durationS: phaseS });
    const rssUp = rssBytes([sidecar.pid]);
    await subscriber.close();

    await broker.stop('SIGKILL', 2000);
    await waitForMetric(systemPort, 'dynamo_sidecar_nats_connected', 0, 10_000);
    const publishedAtOutage = await metric(systemPort, 'dynamo_sidecar_load_events_published_total');
    progress(`round ${index + 1}/${rounds}: ${phaseS} s with the broker down`);
    const down = await runLoad({ ...load, durationS: phaseS });
    const rssDown = rssBytes([sidecar.pid]);
    const publishedWhileDown = (await metric(systemPort, 'dynamo_sidecar_load_events_published_total')) - publishedAtOutage;
    await sidecar.stop('SIGTERM', 8000);
    return {
      p50Up: up.ttft_ms.p50 ?? NaN,
      p50Down: down.ttft_ms.p50 ?? NaN,
      p99Up: up.ttft_ms.p99 ?? NaN,
      p99Down: down.ttft_ms.p99 ?? NaN,
      completedDown: down.completed,
      failedDown: down.rejected + Object.values(down.errors).reduce((a, b) => a + b, 0),
      rssGrowthMiB: (rssDown - rssUp) / 1048576,
      publishedWhileDown,
      publishToReceiveMs: median(delays),
    };
  } finally {
    await stopAll();
    await engine.close();
  }
}

const results: Round[] = [];
try {
  for (let i = 0; i < rounds; i++) results.push(await oneRound(i));
} finally {
  await stopAll();
}

const fmt = (v: number, digits = 1): string => formatNumber(v, digits);
console.log(`node ${process.version}, ${rounds} rounds of ${phaseS} s per phase, concurrency ${concurrency}\n`);
console.log(
  renderTable(
    [
      'round',
      'TTFT p50 up ms',
      'TTFT p50 down ms',
      'ratio',
      'TTFT p99 up ms',
      'TTFT p99 down ms',
      'served down',
      'failed down',
      'RSS growth MiB',
      'published down',
      'publish→receive p50 ms',
    ],
    results.map((r, i) => [
      String(i + 1),
      fmt(r.p50Up, 2),
      fmt(r.p50Down, 2),
      fmt(r.p50Down / r.p50Up, 2),
      fmt(r.p99Up, 2),
      fmt(r.p99Down, 2),
      String(r.completedDown),
      String(r.failedDown),
      fmt(r.rssGrowthMiB),
      String(r.publishedWhileDown),
      fmt(r.publishToReceiveMs),
    ]),
  ),
);
const over = (pick: (r: Round) => number): Spread => spread(results.map(pick));
console.log(
  `\nTTFT p50 down/up: ${formatSpread(
    over((r) => r.p50Down / r.p50Up),
    2,
  )}; RSS growth: ${formatSpread(
    over((r) => r.rssGrowthMiB),
    1,
  )} MiB (median [min..max] over rounds)`,
);

const svg = resolve(values.svg);
mkdirSync(dirname(svg), { recursive: true });
writeBarChart(svg, {
  title: `TTFT p50 with the NATS broker up and down (concurrency ${concurrency})`,
  yLabel: 'TTFT p50 (ms)',
  series: ['broker up', 'broker down'],
  groups: results.map((r, i) => ({ label: `round ${i + 1}`, values: [r.p50Up, r.p50Down] })),
});
console.log(`plot: ${svg}`);

const missed = results.flatMap((r, i) => [
  ...(r.p50Down < 2 * r.p50Up + 20 ? [] : [`round ${i + 1}: TTFT p50 ${fmt(r.p50Down, 2)} ms during the outage vs ${fmt(r.p50Up, 2)} ms before`]),
  ...(r.rssGrowthMiB < 64 ? [] : [`round ${i + 1}: RSS grew ${fmt(r.rssGrowthMiB)} MiB`]),
  ...(r.publishedWhileDown === 0 ? [] : [`round ${i + 1}: ${r.publishedWhileDown} events counted published while the broker was down`]),
  ...(r.publishToReceiveMs < 100 ? [] : [`round ${i + 1}: events took ${fmt(r.publishToReceiveMs)} ms from publish to receive`]),
  ...(r.failedDown === 0 ? [] : [`round ${i + 1}: ${r.failedDown} calls failed during the outage`]),
]);
for (const m of missed) console.log(`goal missed: ${m}`);
process.exitCode = missed.length > 0 ? 1 : 0;
