/**
 * What huge prompts cost everyone else (issue 20, items 3 and 4). Each round starts two workers
 * (a simulated engine and a sidecar each, heartbeat 1 s) and a frontend over them, all real
 * processes of one build (`--cli`, default this tree's dist/cli/main.js, so a parent commit's
 * build can be measured the same way), sends `--huge` concurrent chat bodies of `--huge-bytes`
 * ("a a a ...") while two probe clients send small chat requests one after another, and reads
 * the frontend's RSS from /proc every 10 ms. The same probes run alone for 2 s first: the
 * simulated engine's own spread, which the figures under load compare with.
 *
 *   npx tsc -p tsconfig.json && node --import tsx bench/huge-prompt.ts [--rounds 3] [--huge 2]
 *       [--huge-bytes 6800000] [--probe-s 5] [--max-body-bytes N] [--cli PATH] [--svg PREFIX]
 *
 * Prints one row per round and a summary (median [min..max] over rounds): quiet p50/p99, probe p50/p99/max
 * latency and failures, the frontend's peak RSS and its growth over the idle RSS, the huge
 * requests' statuses and time to answer, and the worker load streams the frontend lost. Writes
 * two bar charts (PREFIX-latency.svg, PREFIX-rss.svg). Goals: no probe fails, no load stream is
 * lost, every huge request gets a 4xx, and the peak RSS growth stays under 64 MiB per huge
 * request. Exit 1 when a goal is missed.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT, SIDECAR_MAIN } from './lib/paths.js';
import { rssBytes } from './lib/proc.js';
import { spawnProcess, stopAll, type BenchProcess, localSidecarEnv } from './lib/spawn.js';
import { distribution, spread, type Spread } from './lib/stats.js';
import { writeBarChart } from './report/svg.js';
import { formatNumber, formatSpread, renderTable } from './report/table.js';

const HELP = `usage: node --import tsx bench/huge-prompt.ts [options]
  --rounds N           rounds, each with fresh workers and frontend (default 3)
  --huge N             concurrent huge chat bodies per round (default 2)
  --huge-bytes B       size of each huge body, "a a a ..." (default 6800000)
  --probe-s S          least seconds of probing per round; it goes on until every huge one is answered (default 5)
  --max-body-bytes N   the frontend's --max-body-bytes (default: the frontend's own)
  --tokenizer-threads N  the frontend's --tokenizer-threads (default: the frontend's own; a parent build may not have it)
  --cli PATH           dist/cli/main.js of the build to measure (default: this tree's)
  --label TEXT         name of the build in the table and the plots (default: "this tree", or the --cli path)
  --svg PREFIX         where the plots go: PREFIX-latency.svg, PREFIX-rss.svg (default bench/results/huge-prompt)`;

const parsed = (() => {
  try {
    return parseArgs({
      options: {
        rounds: { type: 'string', default: '3' },
        huge: { type: 'string', default: '2' },
        'huge-bytes': { type: 'string', default: '6800000' },
        'probe-s': { type: 'string', default: '5' },
        'max-body-bytes': { type: 'string' },
        'tokenizer-threads': { type: 'string' },
        cli: { type: 'string', default: SIDECAR_MAIN },
        label: { type: 'string' },
        svg: { type: 'string', default: 'bench/results/huge-prompt' },
        help: { type: 'boolean', default: false },
      },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n${HELP}`);
    process.exit(2);
  }
})();
if (parsed.help) {
  console.log(HELP);
  process.exit(0);
}

function positiveInteger(name: string, text: string | undefined): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`--${name} must be a positive integer, got "${text}"\n${HELP}`);
    process.exit(2);
  }
  return value;
}
const rounds = positiveInteger('rounds', parsed.rounds);
const hugeCount = positiveInteger('huge', parsed.huge);
const hugeBytes = positiveInteger('huge-bytes', parsed['huge-bytes']);
const probeS = positiveInteger('probe-s', parsed['probe-s']);
const maxBodyBytes = parsed['max-body-bytes'] === undefined ? undefined : positiveInteger('max-body-bytes', parsed['max-body-bytes']);
const tokenizerThreads = parsed['tokenizer-threads'];
if (tokenizerThreads !== undefined && !/^\d+$/u.test(tokenizerThreads)) {
  console.error(`--tokenizer-threads must be an integer >= 0, got "${tokenizerThreads}"\n${HELP}`);
  process.exit(2);
}
const cli = resolve(parsed.cli);
const label = parsed.label ?? (cli === SIDECAR_MAIN ? 'this tree' : cli);

const STREAM_LOST = 'worker load stream lost';
const PROBE_LANES = 2;
const QUIET_S = 2;

interface Round {
  /** Probes before any huge body, for comparison: the simulated engine's own spread. */
  readonly quietP50: number;
  readonly quietP99: number;
  readonly probes: number;
  readonly probeP50: number;
  readonly probeP99: number;
  readonly probeMax: number;
  readonly probeFailures: number;
  readonly idleRssMiB: number;
  readonly peakRssMiB: number;
  readonly hugeStatuses: readonly string[];
  readonly hugeMaxMs: number;
  readonly streamsLost: number;
}

const progress = (message: string): void => void process.stderr.write(`[huge-prompt] ${message}\n`);

async function startWorker(index: number): Promise<string> {
  const engine = spawnProcess(`engine ${index}`, process.execPath, [cli, 'engine', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0'], {
    cwd: REPO_ROOT,
  });
  const engineAddress = (await engine.waitFor(/simulated engine ready grpc=(\S+)/u))[1]!;
  const sidecar = spawnProcess(`sidecar ${index}`, process.execPath, [cli, '--upstream', engineAddress], {
    cwd: REPO_ROOT,
    env: localSidecarEnv({
      DYN_LOAD_HEARTBEAT_MS: '1000',
      DYN_LOG_LEVEL: 'error',
    }),
  });
  const listening = await sidecar.waitFor(/listening on \S+:(\d+), upstream/u);
  return `127.0.0.1:${listening[1]}`;
}

async function startFrontend(workers: readonly string[]): Promise<{ proc: BenchProcess; url: string }> {
  const args = [cli, 'frontend', '--http-host', '127.0.0.1', '--http-port', '0', ...workers.flatMap((w) => ['--worker', w])];
  if (maxBodyBytes !== undefined) args.push('--max-body-bytes', String(maxBodyBytes));
  if (tokenizerThreads !== undefined) args.push('--tokenizer-threads', tokenizerThreads);
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DYN_') && key !== 'NATS_SERVER') env[key] = value;
  const proc = spawnProcess('frontend', process.execPath, args, { cwd: REPO_ROOT, env });
  const port = (await proc.waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/u))[1]!;
  const url = `http://127.0.0.1:${port}`;
  const until = Date.now() + 15_000;
  while (
    (await fetch(`${url}/ready`).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    if (Date.now() > until) throw new Error(`the frontend did not get ready\n${proc.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, url };
}

/** A small chat request's latency in ms, and whether it got its 200. */
async function probe(url: string): Promise<{ ms: number; ok: boolean }> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'simulated-model', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 2 }),
      signal: AbortSignal.timeout(30_000),
    });
    await res.arrayBuffer();
    return { ms: performance.now() - started, ok: res.status === 200 };
  } catch {
    return { ms: performance.now() - started, ok: false };
  }
}

/** One huge body's status (or the error instead) and its time to answer, ms. */
async function huge(url: string, body: Buffer): Promise<{ status: string; ms: number }> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(120_000),
    });
    await res.arrayBuffer();
    return { status: String(res.status), ms: performance.now() - started };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return { status: cause?.code ?? (error as Error).name, ms: performance.now() - started };
  }
}

/** PROBE_LANES clients probing one after another, for at least `seconds` and while `busy()`; at most 100,000 probes (the huge requests time out after 120 s). */
async function probeFor(url: string, busy: () => boolean, seconds: number): Promise<{ ms: number; ok: boolean }[]> {
  const started = performance.now();
  const samples: { ms: number; ok: boolean }[] = [];
  const lane = async (): Promise<void> => {
    while ((busy() || performance.now() - started < seconds * 1000) && samples.length < 100_000) samples.push(await probe(url));
  };
  await Promise.all(Array.from({ length: PROBE_LANES }, lane));
  return samples;
}

function hugeBody(bytes: number): Buffer {
  const head = '{"model":"simulated-model","max_tokens":2,"messages":[{"role":"user","content":"';
  const tail = '"}]}';
  const words = Math.max(1, Math.floor((bytes - head.length - tail.length) / 2));
  return Buffer.from(head + 'a '.repeat(words) + tail);
}

async function oneRound(index: number, body: Buffer): Promise<Round> {
  try {
    progress(`round ${index + 1}/${rounds}: starting two workers and the frontend (${label})`);
    const workers = [await startWorker(1), await startWorker(2)];
    const frontend = await startFrontend(workers);
    for (let i = 0; i < 20; i++) await probe(frontend.url);
    progress(`round ${index + 1}/${rounds}: ${QUIET_S} s of probes alone`);
    const quiet = distribution((await probeFor(frontend.url, () => false, QUIET_S)).map((s) => s.ms));
    await new Promise((r) => setTimeout(r, 200)); // a deliberate pause: the idle RSS after the quiet phase settles
    const idle = rssBytes([frontend.proc.pid]);
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes([frontend.proc.pid]))), 10);

    progress(`round ${index + 1}/${rounds}: ${hugeCount} bodies of ${formatNumber(body.length / 1e6, 1)} MB, probing for at least ${probeS} s`);
    let pending = hugeCount;
    const bigs = Promise.all(
      Array.from({ length: hugeCount }, () =>
        huge(frontend.url, body).finally(() => {
          pending--;
        }),
      ),
    );
    const samples = await probeFor(frontend.url, () => pending > 0, probeS);
    const outcomes = await bigs;
    clearInterval(sampler);
    const latency = distribution(samples.map((s) => s.ms));
    const round: Round = {
      quietP50: quiet.p50,
      quietP99: quiet.p99,
      probes: samples.length,
      probeP50: latency.p50,
      probeP99: latency.p99,
      probeMax: latency.max,
      probeFailures: samples.filter((s) => !s.ok).length,
      idleRssMiB: idle / 1048576,
      peakRssMiB: peak / 1048576,
      hugeStatuses: outcomes.map((o) => o.status),
      hugeMaxMs: Math.max(...outcomes.map((o) => o.ms)),
      streamsLost: frontend.proc.stderr().split(STREAM_LOST).length - 1,
    };
    progress(
      `round ${index + 1}/${rounds}: ${round.probes} probes, ${round.probeFailures} failed, p99 ${formatNumber(round.probeP99, 1)} ms; huge ${round.hugeStatuses.join(' ')}`,
    );
    return round;
  } finally {
    await stopAll();
  }
}

const body = hugeBody(hugeBytes);
const results: Round[] = [];
try {
  for (let i = 0; i < rounds; i++) results.push(await oneRound(i, body));
} finally {
  await stopAll();
}

const fmt = (v: number, digits = 1): string => formatNumber(v, digits);
console.log(
  `node ${process.version}, build: ${label}, ${rounds} rounds, ${hugeCount} concurrent bodies of ${body.length} bytes, ${PROBE_LANES} probe lanes, frontend --max-body-bytes ${maxBodyBytes ?? 'default'} --tokenizer-threads ${tokenizerThreads ?? 'default'}\n`,
);
console.log(
  renderTable(
    [
      'round',
      'quiet p50 ms',
      'quiet p99 ms',
      'probes',
      'probe p50 ms',
      'probe p99 ms',
      'probe max ms',
      'probe failures',
      'idle RSS MiB',
      'peak RSS MiB',
      'RSS growth MiB',
      'huge statuses',
      'huge answered ms',
      'streams lost',
    ],
    results.map((r, i) => [
      String(i + 1),
      fmt(r.quietP50),
      fmt(r.quietP99),
      String(r.probes),
      fmt(r.probeP50),
      fmt(r.probeP99),
      fmt(r.probeMax),
      String(r.probeFailures),
      fmt(r.idleRssMiB),
      fmt(r.peakRssMiB),
      fmt(r.peakRssMiB - r.idleRssMiB),
      r.hugeStatuses.join(' '),
      fmt(r.hugeMaxMs, 0),
      String(r.streamsLost),
    ]),
  ),
);
const over = (pick: (r: Round) => number): Spread => spread(results.map(pick));
console.log(
  `\nprobe p99 ${formatSpread(
    over((r) => r.probeP99),
    1,
  )} ms, max ${formatSpread(
    over((r) => r.probeMax),
    1,
  )} ms; peak RSS growth ${formatSpread(
    over((r) => r.peakRssMiB - r.idleRssMiB),
    1,
  )} MiB; probe failures ${results.reduce((a, r) => a + r.probeFailures, 0)}, streams lost ${results.reduce((a, r) => a + r.streamsLost, 0)} (median [min..max] over rounds)`,
);

const prefix = resolve(parsed.svg);
mkdirSync(dirname(prefix), { recursive: true });
writeBarChart(`${prefix}-latency.svg`, {
  title: `Small requests while ${hugeCount} huge prompts arrive (${label})`,
  yLabel: 'probe latency (ms)',
  series: ['quiet p99', 'p50', 'p99', 'max'],
  groups: results.map((r, i) => ({ label: `round ${i + 1}`, values: [r.quietP99, r.probeP50, r.probeP99, r.probeMax] })),
});
writeBarChart(`${prefix}-rss.svg`, {
  title: `Frontend RSS with ${hugeCount} huge prompts (${label})`,
  yLabel: 'RSS (MiB)',
  series: ['idle', 'peak'],
  groups: results.map((r, i) => ({ label: `round ${i + 1}`, values: [r.idleRssMiB, r.peakRssMiB] })),
});
console.log(`plots: ${prefix}-latency.svg, ${prefix}-rss.svg`);

const missed = results.flatMap((r, i) => [
  ...(r.probeFailures === 0 ? [] : [`round ${i + 1}: ${r.probeFailures} of ${r.probes} small requests failed`]),
  ...(r.streamsLost === 0 ? [] : [`round ${i + 1}: the frontend lost ${r.streamsLost} worker load streams`]),
  ...(r.hugeStatuses.every((s) => /^4\d\d$/u.test(s)) ? [] : [`round ${i + 1}: huge requests ended ${r.hugeStatuses.join(' ')}, not all 4xx`]),
  ...(r.peakRssMiB - r.idleRssMiB < 64 * hugeCount ? [] : [`round ${i + 1}: RSS grew ${fmt(r.peakRssMiB - r.idleRssMiB)} MiB`]),
]);
for (const m of missed) console.log(`goal missed: ${m}`);
process.exitCode = missed.length > 0 ? 1 : 0;
