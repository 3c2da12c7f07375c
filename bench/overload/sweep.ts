/**
 * The sweep that judges admission control: goodput under overload at a bounded TTFT. Real
 * processes (two simulated engines with a GPU cost model, a sidecar in front of each, the
 * frontend routing to both), open-loop Poisson arrivals from the load client over the OpenAI
 * API, offered load from 0.25x to 8x the capacity C, for each configuration:
 *   unprotected  no engine request limit, no busy thresholds;
 *   dynamo       Dynamo as documented: static N and Q, the frontend's decode-blocks threshold;
 *   tuned        this project's hand-tuned configuration: N = 12 and Q = 4 with the first-token
 *                limit 2, refusal by expected wait beyond 50 ms and the adaptive pushback; the
 *                frontend routes by the sidecars' predicted TTFT (its default);
 *   auto         --engine-request-limit auto alone (N from the engine's max_num_seqs);
 *   slo          admission that needs no tuning: --ttft-slo-ms (the run's TTFT SLO) on both
 *                halves and nothing else (N is auto).
 * C is the highest rate the unprotected system serves within the SLO (goodput >= 95% of the
 * offered rate), found first by a ladder of rates unless --capacity gives it.
 *
 *   npm run bench:overload [-- --scenario sweep] [--capacity C] [--multiples 0.25,0.5,0.8,1,2,4,8] [--point-s 20]
 *       [--repeats 3] [--configs unprotected,dynamo,tuned,slo] [--slo-ttft-ms 500] [--slo-itl-ms 50]
 *       [--mix fixed|heavy] [--preset NAME] [--seed 1] [--grace-s 30] [--out DIR]
 *
 * Prints a progress bar, then one Markdown table (median [min..max] over repeats per point and
 * configuration: goodput, p50/p99 TTFT and ITL of admitted requests, 529 share, time to 529 as
 * the load client saw it and p99 as the frontend spent it, the engines' wasted tokens per
 * second), writes it with the JSON of every run (wasted tokens split by reason) into DIR (default bench/results/overload), and draws goodput and p99 TTFT
 * against offered load, one line per configuration (SVG).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runLoad } from '../../src/tools/load/run.js';
import type { LoadSummary } from '../../src/tools/load/stats.js';
import { scrapeWastedTokens, WASTE_REASONS, type WastedTokens } from '../lib/engine-waste.js';
import { scrapeFrontendRejections, type FrontendRejections } from '../lib/frontend-rejections.js';
import { isPresetName, PRESET_NAMES } from '../../src/tools/engine/presets.js';
import { argsOr, BEST, DEFAULT_PRESET, MIXES, ProgressBar, startSystem, type MixName, type System } from '../lib/overload-system.js';
import { stopAll } from '../lib/spawn.js';
import { spread, type Spread } from '../lib/stats.js';
import { lineChartSvg } from '../report/svg.js';
import { formatSpread, renderTable } from '../report/table.js';

const HELP = `usage: npm run bench:overload -- [options]
  --capacity C          capacity in requests/s (default: measured on the unprotected system first)
  --multiples LIST      offered load as multiples of C (default 0.25,0.5,0.8,1,2,4,8)
  --point-s S           seconds of load per point (default 20)
  --repeats K           runs per point and configuration, interleaved (default 3)
  --configs LIST        unprotected,dynamo,auto,tuned,slo (default unprotected,dynamo,tuned,slo)
  --mix NAME            fixed (prompts 128, outputs 64 tokens) or heavy (lognormal: prompts 16..1024, outputs 8..256) (default fixed)
  --slo-ttft-ms MS      SLO: time to first token (default 500)
  --slo-itl-ms MS       SLO: mean inter-token latency (default 50)
  --seed N              seed of the first run; each run adds its index (default 1)
  --grace-s S           after a point, time its requests in flight get before they are cancelled (default 30)
  --preset NAME         the engines' model x GPU (default ${DEFAULT_PRESET}; any of ${PRESET_NAMES.join(', ')})
  --tuned-args=ARGS     the tuned configuration's sidecar flags instead of the built-in ones (space-separated, after =), for tuning
  --tuned-frontend-args=ARGS  the same for its frontend flags
  --out DIR             where the table, JSON and plots go (default bench/results/overload)`;

const CONFIGS = {
  // unprotected and dynamo route as the frontend did before it learned predicted TTFT (least-loaded), so best's routing is part of what is judged.
  unprotected: { sidecar: [] as string[], env: {} as Record<string, string>, frontend: ['--router-mode', 'least-loaded'] },
  dynamo: {
    sidecar: ['--engine-request-limit', '8'],
    env: { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4' },
    frontend: ['--active-decode-blocks-threshold', '0.5', '--router-mode', 'least-loaded'],
  },
  // --engine-request-limit auto alone: N from the engine's max_num_seqs, what a new user tries first.
  auto: { sidecar: ['--engine-request-limit', 'auto'], env: {}, frontend: [] },
  tuned: BEST,
  // Filled in with the run's --slo-ttft-ms below.
  slo: { sidecar: ['--ttft-slo-ms'], env: {}, frontend: ['--ttft-slo-ms'] },
} as const;
type ConfigName = keyof typeof CONFIGS;

const { values } = parseArgs({
  options: {
    // Chosen by bench/overload-sweep.ts, which dispatches on it; this one is the default.
    scenario: { type: 'string', default: 'sweep' },
    capacity: { type: 'string' },
    multiples: { type: 'string', default: '0.25,0.5,0.8,1,2,4,8' },
    'point-s': { type: 'string', default: '20' },
    repeats: { type: 'string', default: '3' },
    configs: { type: 'string', default: 'unprotected,dynamo,tuned,slo' },
    preset: { type: 'string', default: DEFAULT_PRESET },
    mix: { type: 'string', default: 'fixed' },
    'slo-ttft-ms': { type: 'string', default: '500' },
    'slo-itl-ms': { type: 'string', default: '50' },
    seed: { type: 'string', default: '1' },
    'grace-s': { type: 'string', default: '30' },
    'tuned-args': { type: 'string' },
    'tuned-frontend-args': { type: 'string' },
    out: { type: 'string', default: 'bench/results/overload' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const multiples = values.multiples.split(',').map(Number);
const configs = values.configs.split(',') as ConfigName[];
const pointS = Number(values['point-s']);
const repeats = Number(values.repeats);
const slo = { sloTtftMs: Number(values['slo-ttft-ms']), sloItlMs: Number(values['slo-itl-ms']) };
const seed = Number(values.seed);
const mixName = values.mix as MixName;
const graceS = Number(values['grace-s']);
const problems = [
  ...(multiples.every((m) => m > 0) ? [] : ['--multiples must be positive numbers']),
  ...(configs.every((c) => c in CONFIGS) ? [] : [`--configs must be among ${Object.keys(CONFIGS).join(', ')}`]),
  ...(pointS >= 1 ? [] : ['--point-s must be >= 1']),
  ...(Number.isInteger(repeats) && repeats >= 1 ? [] : ['--repeats must be an integer >= 1']),
  ...(slo.sloTtftMs > 0 && slo.sloItlMs > 0 ? [] : ['--slo-ttft-ms and --slo-itl-ms must be > 0']),
  ...(values.capacity === undefined || Number(values.capacity) > 0 ? [] : ['--capacity must be > 0']),
  ...(graceS >= 0 ? [] : ['--grace-s must be >= 0']),
  ...(values.mix in MIXES ? [] : [`--mix must be one of ${Object.keys(MIXES).join(', ')}`]),
  ...(isPresetName(values.preset) ? [] : [`--preset must be one of ${PRESET_NAMES.join(', ')}`]),
];
if (problems.length > 0) {
  console.error(`${problems.join('\n')}\n${HELP}`);
  process.exit(2);
}

/** Two engines, a sidecar in front of each, the frontend over both, in one configuration. */
function startConfig(config: ConfigName): Promise<System> {
  const given = config === 'tuned' ? { sidecar: values['tuned-args'], frontend: values['tuned-frontend-args'] } : {};
  const withSlo = (args: readonly string[]): string[] => (config === 'slo' ? [...args, String(slo.sloTtftMs)] : [...args]);
  return startSystem(
    {
      ...CONFIGS[config],
      sidecar: argsOr(given.sidecar, withSlo(CONFIGS[config].sidecar)),
      frontend: argsOr(given.frontend, withSlo(CONFIGS[config].frontend)),
    },
    values.preset,
  );
}

const bar = new ProgressBar();

interface PointResult {
  readonly summary: LoadSummary;
  /** Tokens the engines threw away during the point, by reason (fresh engines per point: one scrape at its end is the total). */
  readonly wastedTokens: WastedTokens;
  /** The frontend's own time to 529 (its summary), beside the load client's. */
  readonly frontendRejections: FrontendRejections;
}

async function point(config: ConfigName, rate: number, runSeed: number): Promise<PointResult> {
  const system = await startConfig(config);
  try {
    const summary = await runLoad({
      openai: system.url,
      rate,
      arrival: 'poisson',
      durationS: pointS,
      ...MIXES[mixName],
      seed: runSeed,
      graceS,
      ...slo,
    });
    // After the load (its grace cancellations included), before the engines stop.
    return { summary, wastedTokens: await scrapeWastedTokens(system.engineMetricsUrls), frontendRejections: await scrapeFrontendRejections(system.url) };
  } finally {
    await system.stop();
  }
}

/** The highest rate of a ladder the unprotected system serves within the SLO (goodput >= 95% of it). */
async function measureCapacity(): Promise<number> {
  let best = 0;
  const ladder = [2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 32];
  bar.total = ladder.length;
  for (const rate of ladder) {
    bar.show(`capacity: unprotected at ${rate}/s`);
    const s = (await point('unprotected', rate, seed)).summary;
    bar.done++;
    if ((s.slo?.good ?? 0) / pointS < 0.95 * rate) break;
    best = rate;
  }
  if (best === 0) throw new Error('the unprotected system meets the SLO at no rate of the ladder: loosen --slo-ttft-ms / --slo-itl-ms');
  return best;
}

const capacity = values.capacity === undefined ? await measureCapacity() : Number(values.capacity);
bar.done = 0;
bar.total = multiples.length * configs.length * repeats;
const runs: ({ config: ConfigName; multiple: number; rate: number; repeat: number } & PointResult)[] = [];
try {
  // Interleaved: every configuration of a point, then the next repeat, so drift hits all alike.
  for (const [pointIndex, multiple] of multiples.entries()) {
    for (let repeat = 0; repeat < repeats; repeat++) {
      // One seed per point and repeat, the same for every configuration: they get the same arrivals and lengths.
      const runSeed = seed + 1000 * repeat + pointIndex;
      for (const config of configs) {
        const rate = multiple * capacity;
        bar.show(`${config} at ${multiple}x C (${rate.toFixed(1)}/s), run ${repeat + 1}/${repeats}`);
        runs.push({ config, multiple, rate, repeat, ...(await point(config, rate, runSeed)) });
        bar.done++;
      }
    }
  }
} finally {
  await stopAll();
  process.stderr.write('\n');
}

const figure = ({ summary: s, wastedTokens: w, frontendRejections: f }: PointResult) => {
  const answered = s.completed + s.rejected;
  return {
    // Per second of arrivals: the drain after them (the slowest requests' tails) is no time the system was offered load.
    goodput: s.slo === undefined ? NaN : s.slo.good / pointS,
    ttftP50: s.ttft_ms.p50 ?? NaN,
    ttftP99: s.ttft_ms.p99 ?? NaN,
    itlP50: s.itl_ms.p50 ?? NaN,
    itlP99: s.itl_ms.p99 ?? NaN,
    share529: answered === 0 ? NaN : (100 * s.rejected) / answered,
    rejectP50: s.time_to_reject_ms.p50 ?? NaN,
    rejectP99: s.time_to_reject_ms.p99 ?? NaN,
    frontendRejectP99: f.p99Ms,
    // Per second of arrivals as goodput; the split by reason is in the JSON.
    wastedPerS: WASTE_REASONS.reduce((sum, reason) => sum + w[reason], 0) / pointS,
  };
};
type Figure = ReturnType<typeof figure>;
const over = (config: ConfigName, multiple: number, pick: (f: Figure) => number): Spread =>
  spread(runs.filter((r) => r.config === config && r.multiple === multiple).map((r) => pick(figure(r))));

const header = [
  'offered',
  'config',
  'goodput req/s',
  'TTFT p50 ms',
  'TTFT p99 ms',
  'ITL p50 ms',
  'ITL p99 ms',
  '529 %',
  'time to 529 p50 ms',
  'p99 ms',
  'frontend p99 ms',
  'wasted tok/s',
];
const body = multiples.flatMap((m) =>
  configs.map((c) => [
    `${m}x (${(m * capacity).toFixed(1)}/s)`,
    c,
    formatSpread(
      over(c, m, (f) => f.goodput),
      2,
    ),
    formatSpread(over(c, m, (f) => f.ttftP50)),
    formatSpread(over(c, m, (f) => f.ttftP99)),
    formatSpread(
      over(c, m, (f) => f.itlP50),
      1,
    ),
    formatSpread(
      over(c, m, (f) => f.itlP99),
      1,
    ),
    formatSpread(
      over(c, m, (f) => f.share529),
      1,
    ),
    formatSpread(
      over(c, m, (f) => f.rejectP50),
      1,
    ),
    formatSpread(
      over(c, m, (f) => f.rejectP99),
      1,
    ),
    formatSpread(
      over(c, m, (f) => f.frontendRejectP99),
      2,
    ),
    formatSpread(over(c, m, (f) => f.wastedPerS)),
  ]),
);
const markdown = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...body.map((row) => `| ${row.join(' | ')} |`)].join('\n');
const title = `C = ${capacity} req/s (unprotected, SLO TTFT <= ${slo.sloTtftMs} ms and mean ITL <= ${slo.sloItlMs} ms); ${repeats} runs of ${pointS} s per point; mix ${mixName} (prompts ${MIXES[mixName].promptTokens.min}..${MIXES[mixName].promptTokens.max}, outputs ${MIXES[mixName].maxTokens.min}..${MIXES[mixName].maxTokens.max} tokens, ${MIXES[mixName].lengthDistribution})`;
console.log(`${title}\n\n${renderTable(header, body)}`);

const out = resolve(values.out);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'overload.md'), `${title}\n\n${markdown}\n`);
writeFileSync(
  join(out, 'overload.json'),
  `${JSON.stringify({ schema: 'dynamo-sidecar-overload/1', capacity, slo, mix: mixName, pointS, repeats, runs }, null, 2)}\n`,
);
const lines = (pick: (f: Figure) => number) => configs.map((c) => ({ name: c, points: multiples.map((m) => [m, over(c, m, pick).median] as const) }));
writeFileSync(
  join(out, 'goodput.svg'),
  lineChartSvg({
    title: `Goodput under overload (${title.split(';')[0]})`,
    xLabel: 'offered load (x C)',
    yLabel: 'goodput (req/s within the SLO)',
    series: lines((f) => f.goodput),
    logX: true,
  }),
);
writeFileSync(
  join(out, 'ttft-p99.svg'),
  lineChartSvg({ title: 'p99 TTFT of admitted requests', xLabel: 'offered load (x C)', yLabel: 'TTFT p99 (ms)', series: lines((f) => f.ttftP99), logX: true }),
);
console.log(`\nwritten: ${join(out, 'overload.md')}, overload.json, goodput.svg, ttft-p99.svg`);
