/**
 * The classes scenario of `npm run bench:overload`: does priority keep the important traffic
 * served under overload? A two-class mix, 20% of the requests at priority 0 (high) and 80% at
 * priority 1 (low), offered from 0.5x to 8x the capacity C as two concurrent open-loop Poisson
 * load clients (one per class, over the OpenAI API), for two configurations in the same
 * interleaved run:
 *   best           the best configuration (bench/lib/overload-system.ts) with no class sent:
 *                  every request alike, the baseline;
 *   best+priority  the same sidecars with the classes sent (x-request-priority) and a longer
 *                  expected wait (BEST_WITH_CLASSES): their queues serve priority 0 first and
 *                  let it displace queued priority 1 calls; the frontend busy for the low class
 *                  at 0.25 of a full-KV threshold (PRIORITY_FRONTEND).
 * Goal: the high class's goodput (completed within the SLO) >= 99% of what it offered at every
 * point up to 4x C, while the low class absorbs the refusals.
 *
 *   npm run bench:overload -- --scenario classes [--capacity C] [--multiples 0.5,1,2,4,8]
 *       [--high-share 0.2] [--point-s 15] [--repeats 3] [--configs best,best+priority]
 *       [--slo-ttft-ms 500] [--slo-itl-ms 50] [--seed 1] [--grace-s 5] [--out DIR]
 *
 * Prints a progress bar, then a Markdown table (median [min..max] over repeats per point,
 * configuration and class) and the verdicts, writes them with the JSON of every run into DIR
 * (default bench/results/overload-classes), and draws each class's goodput and the high class's
 * share served within the SLO against offered load (SVG).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runLoad } from '../../src/tools/load/run.js';
import { classesVerdict, classLoads, loadFigures, type ClassesRun, type ClassLoad, type LoadFigures } from '../lib/overload-scenarios.js';
import { argsOr, BEST, BEST_WITH_CLASSES, exitOnProblems, MIXES, runProblems, ProgressBar, startSystem, type SystemConfig } from '../lib/overload-system.js';
import { stopAll } from '../lib/spawn.js';
import { spread, type Spread } from '../lib/stats.js';
import { lineChartSvg } from '../report/svg.js';
import { formatSpread, renderTable } from '../report/table.js';

const HELP = `usage: npm run bench:overload -- --scenario classes [options]
  --capacity C          capacity in requests/s: the unprotected system's, as the sweep measures it (default 14, the sweep's latest on a 2-core machine)
  --multiples LIST      total offered load as multiples of C (default 0.5,1,2,4,8)
  --high-share F        share of the requests at high priority (default 0.2)
  --point-s S           seconds of load per point (default 15)
  --repeats K           runs per point and configuration, interleaved (default 3)
  --configs LIST        best,best+priority (default both)
  --slo-ttft-ms MS      SLO: time to first token (default 500)
  --slo-itl-ms MS       SLO: mean inter-token latency (default 50)
  --seed N              seed of the first run (default 1)
  --grace-s S           after a point, time its requests in flight get before they are cancelled (default 5)
  --priority-args=ARGS  best+priority's sidecar flags instead of best's (space-separated, after =), for tuning
  --priority-frontend-args=ARGS  best+priority's frontend flags instead of the built-in ones
  --out DIR             where the table, JSON and plots go (default bench/results/overload-classes)`;

/**
 * The frontend's classes: a worker is busy for every class when its KV cache is full
 * (kv_used_blocks > 1.0 x kv_total_blocks, which the sidecars' own cap keeps from happening
 * often), and for the low class (priority 1 and beyond) at 0.25 of that, 32 of 128 blocks
 * (under three of the mix's 12-block sequences): the low class stops being routed while the
 * engine still has room, which the high class then finds. At 4x C the high class alone offers
 * 0.8x C, so the low class has to be held to about a fifth of the engines; quick looks with 0.6
 * and 0.4 left it 45% and 31% (docs/performance.md). Without a threshold the scale has nothing
 * to scale.
 */
const PRIORITY_FRONTEND = ['--active-decode-blocks-threshold', '1', '--priority-threshold-scale', '1=0.25'];

const { values } = parseArgs({
  options: {
    scenario: { type: 'string' },
    capacity: { type: 'string', default: '14' },
    multiples: { type: 'string', default: '0.5,1,2,4,8' },
    'high-share': { type: 'string', default: '0.2' },
    'point-s': { type: 'string', default: '15' },
    repeats: { type: 'string', default: '3' },
    configs: { type: 'string', default: 'best,best+priority' },
    'slo-ttft-ms': { type: 'string', default: '500' },
    'slo-itl-ms': { type: 'string', default: '50' },
    seed: { type: 'string', default: '1' },
    'grace-s': { type: 'string', default: '5' },
    'priority-args': { type: 'string' },
    'priority-frontend-args': { type: 'string' },
    out: { type: 'string', default: 'bench/results/overload-classes' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

const CONFIGS: Record<string, { readonly system: SystemConfig; readonly sendClass: boolean }> = {
  best: { system: BEST, sendClass: false },
  'best+priority': {
    system: {
      ...BEST_WITH_CLASSES,
      sidecar: argsOr(values['priority-args'], BEST_WITH_CLASSES.sidecar),
      frontend: argsOr(values['priority-frontend-args'], [...BEST.frontend, ...PRIORITY_FRONTEND]),
    },
    sendClass: true,
  },
};

const capacity = Number(values.capacity);
const multiples = values.multiples.split(',').map(Number);
const highShare = Number(values['high-share']);
const configs = values.configs.split(',');
const pointS = Number(values['point-s']);
const repeats = Number(values.repeats);
const slo = { sloTtftMs: Number(values['slo-ttft-ms']), sloItlMs: Number(values['slo-itl-ms']) };
const seed = Number(values.seed);
const graceS = Number(values['grace-s']);
const problems = [
  ...(capacity > 0 ? [] : ['--capacity must be > 0']),
  ...(multiples.every((m) => m > 0) ? [] : ['--multiples must be positive numbers']),
  ...(highShare > 0 && highShare < 1 ? [] : ['--high-share must be between 0 and 1']),
  ...runProblems({ configs, known: Object.keys(CONFIGS), pointS, repeats, slo, seed, graceS }),
];
exitOnProblems(problems, HELP);

const bar = new ProgressBar();

/** One point: a fresh system, both classes at once, each with a seed of its own. */
async function point(config: string, totalRate: number, runSeed: number): Promise<ClassesRun['classes']> {
  const { system: systemConfig, sendClass } = CONFIGS[config]!;
  const system = await startSystem(systemConfig);
  try {
    const loads = classLoads(totalRate, highShare);
    const summaries = await Promise.all(
      loads.map((load: ClassLoad, i) =>
        runLoad({
          openai: system.url,
          rate: load.rate,
          arrival: 'poisson',
          durationS: pointS,
          ...MIXES.fixed,
          seed: runSeed + i,
          graceS,
          ...slo,
          ...(sendClass && { priority: load.priority }),
        }),
      ),
    );
    return { high: summaries[0]!, low: summaries[1]! };
  } finally {
    await system.stop();
  }
}

bar.total = multiples.length * configs.length * repeats;
const runs: (ClassesRun & { rate: number })[] = [];
try {
  // Interleaved: every configuration of a point, then the next repeat, so drift hits all alike.
  for (const [pointIndex, multiple] of multiples.entries()) {
    for (let repeat = 0; repeat < repeats; repeat++) {
      // The same seeds for every configuration of a point and repeat: the same arrivals and lengths.
      const runSeed = seed + 1000 * repeat + 10 * pointIndex;
      for (const config of configs) {
        const rate = multiple * capacity;
        bar.show(`${config} at ${multiple}x C (${rate.toFixed(1)}/s), run ${repeat + 1}/${repeats}`);
        runs.push({ config, multiple, rate, repeat, classes: await point(config, rate, runSeed) });
        bar.done++;
      }
    }
  }
} finally {
  await stopAll();
  process.stderr.write('\n');
}

const CLASSES = ['high', 'low'] as const;
const over = (config: string, multiple: number, name: (typeof CLASSES)[number], pick: (f: LoadFigures) => number): Spread =>
  spread(runs.filter((r) => r.config === config && r.multiple === multiple).map((r) => pick(loadFigures([r.classes[name]], pointS))));

const header = ['offered', 'config', 'class', 'offered req/s', 'goodput req/s', 'good % of offered', 'TTFT p50 ms', 'TTFT p99 ms', '529 %'];
const body = multiples.flatMap((m) =>
  configs.flatMap((c) =>
    CLASSES.map((name) => {
      const share = name === 'high' ? highShare : 1 - highShare;
      return [
        `${m}x (${(m * capacity).toFixed(1)}/s)`,
        c,
        name,
        (m * capacity * share).toFixed(2),
        formatSpread(
          over(c, m, name, (f) => f.goodputPerS),
          2,
        ),
        formatSpread(
          over(c, m, name, (f) => 100 * f.goodShare),
          1,
        ),
        formatSpread(over(c, m, name, (f) => f.ttftP50)),
        formatSpread(over(c, m, name, (f) => f.ttftP99)),
        formatSpread(
          over(c, m, name, (f) => 100 * f.share529),
          1,
        ),
      ];
    }),
  ),
);
const markdown = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...body.map((row) => `| ${row.join(' | ')} |`)].join('\n');
const title = `C = ${capacity} req/s; ${(100 * highShare).toFixed(0)}% high (priority 0), ${(100 * (1 - highShare)).toFixed(0)}% low (priority 1); SLO TTFT <= ${slo.sloTtftMs} ms and mean ITL <= ${slo.sloItlMs} ms; ${repeats} runs of ${pointS} s per point; prompts 128, outputs 64 tokens`;
const verdicts = configs.map((c) => classesVerdict(runs, c, pointS));
console.log(`${title}\n\n${renderTable(header, body)}\n\n${verdicts.map((v) => v.text).join('\n')}`);

const out = resolve(values.out);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'classes.md'), `${title}\n\n${markdown}\n\n${verdicts.map((v) => `- ${v.text}`).join('\n')}\n`);
writeFileSync(
  join(out, 'classes.json'),
  `${JSON.stringify({ schema: 'dynamo-sidecar-overload-classes/1', capacity, highShare, slo, pointS, repeats, configs: Object.fromEntries(configs.map((c) => [c, CONFIGS[c]])), verdicts, runs }, null, 2)}\n`,
);
const lines = (pick: (f: LoadFigures) => number, names: readonly (typeof CLASSES)[number][]) =>
  configs.flatMap((c) => names.map((name) => ({ name: `${c} ${name}`, points: multiples.map((m) => [m, over(c, m, name, pick).median] as const) })));
writeFileSync(
  join(out, 'classes-goodput.svg'),
  lineChartSvg({
    title: `Goodput per class under overload (C = ${capacity} req/s, ${(100 * highShare).toFixed(0)}% high)`,
    xLabel: 'total offered load (x C)',
    yLabel: 'goodput (req/s within the SLO)',
    series: [
      { name: 'high offered', points: multiples.map((m) => [m, Number((m * capacity * highShare).toFixed(2))] as const) },
      ...lines((f) => f.goodputPerS, CLASSES),
    ],
    logX: true,
  }),
);
writeFileSync(
  join(out, 'classes-high-share.svg'),
  lineChartSvg({
    title: 'High-priority requests served within the SLO (goal: >= 99% up to 4x C)',
    xLabel: 'total offered load (x C)',
    yLabel: 'good % of offered (high class)',
    series: lines((f) => 100 * f.goodShare, ['high']),
    logX: true,
  }),
);
console.log(`\nwritten: ${join(out, 'classes.md')}, classes.json, classes-goodput.svg, classes-high-share.svg`);
