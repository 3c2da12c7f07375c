/**
 * The tenants scenario of `npm run bench:overload`: can one noisy tenant take the fleet from the
 * polite ones? Four polite tenants each offer their fair share (together 0.8x the capacity C, so
 * 0.2x C each) and one noisy tenant offers 10 times its share (2x C), as concurrent open-loop
 * Poisson load clients over the OpenAI API, one per tenant; each run is repeated without the
 * noisy tenant (the same seeds, so the same polite arrivals). Two configurations in the same
 * interleaved run:
 *   best            the best configuration (bench/lib/overload-system.ts) with no tenant sent;
 *   best+fairness   the same with each tenant sent (x-tenant-id: the sidecars' queues serve
 *                   tenants round-robin), a longer expected wait (BEST_WITH_CLASSES) and the
 *                   frontend's --tenant-max-inflight.
 * Goal: the polite tenants' goodput (completed within the SLO) drops by less than 5% when the
 * noisy tenant joins.
 *
 *   npm run bench:overload -- --scenario tenants [--capacity C] [--polite-share 0.8]
 *       [--polite-tenants 4] [--noisy-factor 10] [--tenant-max-inflight 8] [--point-s 20]
 *       [--repeats 3] [--configs best,best+fairness] [--slo-ttft-ms 500] [--slo-itl-ms 50]
 *       [--seed 1] [--grace-s 5] [--out DIR]
 *
 * Prints a progress bar, then a Markdown table (median [min..max] over repeats per configuration,
 * with and without the noisy tenant) and the verdicts, writes them with the JSON of every run into
 * DIR (default bench/results/overload-tenants), and draws the polite tenants' goodput with and
 * without the noisy tenant per configuration (SVG).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runLoad } from '../../src/tools/load/run.js';
import { loadFigures, politeDrop, tenantLoads, tenantsVerdict, type LoadFigures, type TenantsRun } from '../lib/overload-scenarios.js';
import { argsOr, BEST, BEST_WITH_CLASSES, exitOnProblems, MIXES, runProblems, ProgressBar, startSystem, type SystemConfig } from '../lib/overload-system.js';
import { stopAll } from '../lib/spawn.js';
import { spread, type Spread } from '../lib/stats.js';
import { barChartSvg } from '../report/svg.js';
import { formatSpread, renderTable } from '../report/table.js';

const HELP = `usage: npm run bench:overload -- --scenario tenants [options]
  --capacity C              capacity in requests/s: the unprotected system's, as the sweep measures it (default 14, the sweep's latest on a 2-core machine)
  --polite-share F          what the polite tenants offer together, as a multiple of C (default 0.8)
  --polite-tenants N        how many polite tenants share it equally (default 4)
  --noisy-factor X          the noisy tenant offers X times a polite tenant's share (default 10)
  --tenant-max-inflight K   best+fairness's frontend cap of requests in flight per tenant (default 8)
  --point-s S               seconds of load per run (default 20)
  --repeats K               runs per configuration, with and without the noisy tenant, interleaved (default 3)
  --configs LIST            best,best+fairness (default both)
  --slo-ttft-ms MS          SLO: time to first token (default 500)
  --slo-itl-ms MS           SLO: mean inter-token latency (default 50)
  --seed N                  seed of the first run (default 1)
  --grace-s S               after a run, time its requests in flight get before they are cancelled (default 5)
  --fairness-args=ARGS      best+fairness's sidecar flags instead of best's (space-separated, after =), for tuning
  --fairness-frontend-args=ARGS  best+fairness's frontend flags instead of the built-in ones (--tenant-max-inflight is then not added)
  --out DIR                 where the table, JSON and plots go (default bench/results/overload-tenants)`;

const { values } = parseArgs({
  options: {
    scenario: { type: 'string' },
    capacity: { type: 'string', default: '14' },
    'polite-share': { type: 'string', default: '0.8' },
    'polite-tenants': { type: 'string', default: '4' },
    'noisy-factor': { type: 'string', default: '10' },
    // A polite tenant has about 0.2 C x 1.3 s = 3.6 requests in flight (Little's law: 2.8/s, a
    // request takes 64 tokens x 19 ms plus its first token), so 8 leaves its Poisson bursts room;
    // the fleet holds 2 x (N 12 + Q 4) = 32, so one tenant at 8 leaves three quarters to the others.
    'tenant-max-inflight': { type: 'string', default: '8' },
    'point-s': { type: 'string', default: '20' },
    repeats: { type: 'string', default: '3' },
    configs: { type: 'string', default: 'best,best+fairness' },
    'slo-ttft-ms': { type: 'string', default: '500' },
    'slo-itl-ms': { type: 'string', default: '50' },
    seed: { type: 'string', default: '1' },
    'grace-s': { type: 'string', default: '5' },
    'fairness-args': { type: 'string' },
    'fairness-frontend-args': { type: 'string' },
    out: { type: 'string', default: 'bench/results/overload-tenants' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

const maxInflight = Number(values['tenant-max-inflight']);
const CONFIGS: Record<string, { readonly system: SystemConfig; readonly sendTenant: boolean }> = {
  best: { system: BEST, sendTenant: false },
  'best+fairness': {
    system: {
      ...BEST_WITH_CLASSES,
      sidecar: argsOr(values['fairness-args'], BEST_WITH_CLASSES.sidecar),
      frontend: argsOr(values['fairness-frontend-args'], [...BEST.frontend, '--tenant-max-inflight', String(maxInflight)]),
    },
    sendTenant: true,
  },
};

const capacity = Number(values.capacity);
const politeShare = Number(values['polite-share']);
const politeTenants = Number(values['polite-tenants']);
const noisyFactor = Number(values['noisy-factor']);
const configs = values.configs.split(',');
const pointS = Number(values['point-s']);
const repeats = Number(values.repeats);
const slo = { sloTtftMs: Number(values['slo-ttft-ms']), sloItlMs: Number(values['slo-itl-ms']) };
const seed = Number(values.seed);
const graceS = Number(values['grace-s']);
const problems = [
  ...(capacity > 0 && politeShare > 0 && noisyFactor > 0 ? [] : ['--capacity, --polite-share and --noisy-factor must be > 0']),
  ...(Number.isInteger(politeTenants) && politeTenants >= 1 ? [] : ['--polite-tenants must be an integer >= 1']),
  ...(Number.isInteger(maxInflight) && maxInflight >= 1 ? [] : ['--tenant-max-inflight must be an integer >= 1']),
  ...runProblems({ configs, known: Object.keys(CONFIGS), pointS, repeats, slo, seed, graceS }),
];
exitOnProblems(problems, HELP);

const bar = new ProgressBar();

/** One run: a fresh system, every tenant at once, each with a seed of its own (the same with or without the noisy one). */
async function run(config: string, withNoisy: boolean, runSeed: number): Promise<TenantsRun['tenants']> {
  const { system: systemConfig, sendTenant } = CONFIGS[config]!;
  const system = await startSystem(systemConfig);
  try {
    const loads = tenantLoads({ capacity, politeShare, politeTenants, noisyFactor, withNoisy });
    return await Promise.all(
      loads.map(async (load, i) => ({
        tenant: load.tenant,
        polite: load.polite,
        summary: await runLoad({
          openai: system.url,
          rate: load.rate,
          arrival: 'poisson',
          durationS: pointS,
          ...MIXES.fixed,
          seed: runSeed + i,
          graceS,
          ...slo,
          ...(sendTenant && { tenant: load.tenant }),
        }),
      })),
    );
  } finally {
    await system.stop();
  }
}

const VARIANTS = [false, true] as const;
bar.total = configs.length * VARIANTS.length * repeats;
const runs: TenantsRun[] = [];
try {
  for (let repeat = 0; repeat < repeats; repeat++) {
    const runSeed = seed + 1000 * repeat;
    for (const config of configs) {
      for (const withNoisy of VARIANTS) {
        bar.show(`${config} ${withNoisy ? 'with' : 'without'} the noisy tenant, run ${repeat + 1}/${repeats}`);
        runs.push({ config, withNoisy, repeat, tenants: await run(config, withNoisy, runSeed) });
        bar.done++;
      }
    }
  }
} finally {
  await stopAll();
  process.stderr.write('\n');
}

const of = (config: string, withNoisy: boolean, polite: boolean, pick: (f: LoadFigures) => number): Spread =>
  spread(
    runs
      .filter((r) => r.config === config && r.withNoisy === withNoisy)
      .map((r) =>
        pick(
          loadFigures(
            r.tenants.filter((t) => t.polite === polite).map((t) => t.summary),
            pointS,
          ),
        ),
      ),
  );
/** The polite tenant served least, per run. */
const worstPolite = (config: string, withNoisy: boolean): Spread =>
  spread(
    runs
      .filter((r) => r.config === config && r.withNoisy === withNoisy)
      .map((r) => Math.min(...r.tenants.filter((t) => t.polite).map((t) => loadFigures([t.summary], pointS).goodputPerS))),
  );

const politeRate = (capacity * politeShare) / politeTenants;
const header = [
  'config',
  'noisy tenant',
  'polite goodput req/s',
  'polite good %',
  'polite 529 %',
  'polite 429 %',
  'polite TTFT p99 ms',
  'worst polite tenant req/s',
  'noisy goodput req/s',
  'noisy 429 %',
  'noisy 529 %',
];
const body = configs.flatMap((c) =>
  VARIANTS.map((withNoisy) => [
    c,
    withNoisy ? `${(politeRate * noisyFactor).toFixed(1)}/s` : 'none',
    formatSpread(
      of(c, withNoisy, true, (f) => f.goodputPerS),
      2,
    ),
    formatSpread(
      of(c, withNoisy, true, (f) => 100 * f.goodShare),
      1,
    ),
    formatSpread(
      of(c, withNoisy, true, (f) => 100 * f.share529),
      1,
    ),
    formatSpread(
      of(c, withNoisy, true, (f) => 100 * f.share429),
      1,
    ),
    formatSpread(of(c, withNoisy, true, (f) => f.ttftP99)),
    formatSpread(worstPolite(c, withNoisy), 2),
    withNoisy
      ? formatSpread(
          of(c, true, false, (f) => f.goodputPerS),
          2,
        )
      : '-',
    withNoisy
      ? formatSpread(
          of(c, true, false, (f) => 100 * f.share429),
          1,
        )
      : '-',
    withNoisy
      ? formatSpread(
          of(c, true, false, (f) => 100 * f.share529),
          1,
        )
      : '-',
  ]),
);
const markdown = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...body.map((row) => `| ${row.join(' | ')} |`)].join('\n');
const title = `C = ${capacity} req/s; ${politeTenants} polite tenants at ${politeRate.toFixed(2)}/s each (${politeShare}x C together), the noisy one at ${noisyFactor}x that; best+fairness: --tenant-max-inflight ${maxInflight}; SLO TTFT <= ${slo.sloTtftMs} ms and mean ITL <= ${slo.sloItlMs} ms; ${repeats} runs of ${pointS} s; prompts 128, outputs 64 tokens`;
const verdicts = configs.map((c) => tenantsVerdict(runs, c));
console.log(`${title}\n\n${renderTable(header, body)}\n\n${verdicts.map((v) => v.text).join('\n')}`);

const out = resolve(values.out);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'tenants.md'), `${title}\n\n${markdown}\n\n${verdicts.map((v) => `- ${v.text}`).join('\n')}\n`);
writeFileSync(
  join(out, 'tenants.json'),
  `${JSON.stringify(
    {
      schema: 'dynamo-sidecar-overload-tenants/1',
      capacity,
      politeShare,
      politeTenants,
      noisyFactor,
      tenantMaxInflight: maxInflight,
      slo,
      pointS,
      repeats,
      configs: Object.fromEntries(configs.map((c) => [c, CONFIGS[c]])),
      drops: Object.fromEntries(configs.map((c) => [c, politeDrop(runs, c)])),
      verdicts,
      runs,
    },
    null,
    2,
  )}\n`,
);
writeFileSync(
  join(out, 'tenants-polite-goodput.svg'),
  barChartSvg({
    title: `Polite tenants' goodput (${politeTenants} x ${politeRate.toFixed(2)}/s offered), without and with the noisy tenant`,
    yLabel: 'polite goodput (req/s within the SLO)',
    series: ['without the noisy tenant', 'with the noisy tenant'],
    groups: configs.map((c) => ({ label: c, values: VARIANTS.map((withNoisy) => of(c, withNoisy, true, (f) => f.goodputPerS).median) })),
  }),
);
console.log(`\nwritten: ${join(out, 'tenants.md')}, tenants.json, tenants-polite-goodput.svg`);
