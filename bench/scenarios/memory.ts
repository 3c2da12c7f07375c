/**
 * Scenario 4: memory. A fresh proxy per round; a client opens calls the upstream answers with
 * headers and then holds, first 1,000 then 10,000 at once (100 per client connection). RSS of
 * the proxy process tree (VmRSS from /proc/PID/status) idle, at each step; bytes per stream =
 * (RSS at the big step - RSS at the small step) / (difference in held streams).
 */
import { startSteppedClient } from '../lib/client.js';
import { processTree, rssBytes } from '../lib/proc.js';
import { sleep } from '../lib/spawn.js';
import { startTarget, type Target } from '../targets/index.js';
import { rosterSpecs } from '../targets/roster.js';
import { startUpstream } from '../targets/upstream.js';
import { runRounds } from './rounds.js';
import { pairScenario } from './summary.js';
import { newResult, type BenchContext, type Figures, type PairDef, type ScenarioResult } from './types.js';

const MB = 1024 * 1024;
/** The goals' steps: RSS at 1,000 held streams, bytes per stream from 1,000 to 10,000. */
export const MEMORY_STEPS = [1000, 10_000] as const;

export const MEMORY_AB: PairDef[] = [
  { metric: 'rssSmallMB', op: 'ratio', label: 'RSS at the small step' },
  { metric: 'bytesPerStream', op: 'ratio', label: 'bytes/stream' },
];

export async function runMemory(ctx: BenchContext): Promise<ScenarioResult> {
  const steps = ctx.options.quick ? [100, 1000] : [...MEMORY_STEPS];
  const [small, big] = steps as [number, number];
  const rounds = ctx.options.rounds;
  const result = newResult(
    'memory',
    `Scenario 4: proxy RSS with ${small.toLocaleString('en-US')} and ${big.toLocaleString('en-US')} concurrent held streams`,
    [
      'fresh proxy per round; node:http2 client, 100 streams per connection; upstream answers headers then holds until cancel',
      'RSS = VmRSS of the proxy process tree (/proc/PID/status; nginx master + worker), read 300 ms after the step is fully open',
      `bytes/stream = (RSS@${big} - RSS@${small}) / (streams held at the big step - at the small step); ${rounds} rounds, target order rotated; no warm-up (RSS, not CPU)`,
      'sidecar rows without admission (as HAProxy and nginx here: no limits), each on its own Node binary',
    ],
    [
      { key: 'rssIdleMB', label: 'RSS idle MB', digits: 1 },
      { key: 'rssSmallMB', label: `RSS@${small} MB`, digits: 1 },
      { key: 'rssBigMB', label: `RSS@${big} MB`, digits: 1 },
      { key: 'bytesPerStream', label: 'bytes/stream', digits: 0 },
      { key: 'heldBig', label: 'held', digits: 0 },
      { key: 'failed', label: 'failed', digits: 0 },
    ],
  );
  result.extra = { steps };
  const upstream = await startUpstream(ctx.plan.upstream);
  try {
    const specs = rosterSpecs(ctx.roster, { direct: false });
    await runRounds(result, {
      targets: specs.map((s) => s.name),
      rounds,
      measure: async (name) => {
        const target = await startTarget(
          specs.find((s) => s.name === name)!,
          upstream.port,
          ctx.plan,
          ctx.dir,
        );
        try {
          return await measureTarget(ctx, target, steps);
        } finally {
          await target.stop();
        }
      },
    });
    pairScenario(
      result,
      ctx.roster,
      [
        {
          numerators: 'sidecars',
          denominator: 'haproxy',
          defs: [
            { metric: 'rssSmallMB', op: 'ratio', label: `RSS@${small}` },
            { metric: 'bytesPerStream', op: 'ratio', label: 'bytes/stream' },
          ],
        },
      ],
      MEMORY_AB,
    );
    return result;
  } finally {
    await upstream.stop();
  }
}

async function measureTarget(ctx: BenchContext, target: Target, steps: number[]): Promise<Figures> {
  await sleep(300);
  const rss = (): number => rssBytes(processTree(target.pid!));
  const idle = rss();
  const client = startSteppedClient('hold-client', { port: target.port, steps, perSession: 100, stepTimeoutMs: 30_000 }, ctx.plan.client);
  try {
    const figures: Figures = { rssIdleMB: idle / MB };
    let failed = 0;
    const rssAt: number[] = [];
    const heldAt: number[] = [];
    for (let i = 0; i < steps.length; i++) {
      const re = new RegExp(`\\{"step":${steps[i]},"held":(\\d+),"failed":(\\d+)`);
      const m = await client.waitFor(re, 60_000);
      await sleep(300);
      rssAt.push(rss());
      heldAt.push(Number(m[1]));
      failed += Number(m[2]);
      client.child.stdin!.write('next\n');
    }
    await client.exited(30_000);
    figures['rssSmallMB'] = rssAt[0]! / MB;
    figures['rssBigMB'] = rssAt[1]! / MB;
    figures['heldSmall'] = heldAt[0]!;
    figures['heldBig'] = heldAt[1]!;
    figures['bytesPerStream'] = (rssAt[1]! - rssAt[0]!) / (heldAt[1]! - heldAt[0]!);
    figures['failed'] = failed;
    ctx.log(`  memory ${target.name}: idle ${(idle / MB).toFixed(1)} MB, ${heldAt.join('/')} held -> ${rssAt.map((b) => (b / MB).toFixed(1)).join('/')} MB`);
    return figures;
  } finally {
    await client.stop('SIGKILL');
  }
}
