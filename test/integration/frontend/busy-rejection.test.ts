/**
 * Busy rejection end to end, with real processes: two simulated engines with a small KV cache
 * (64 blocks of 4 tokens) and slow prefill, a sidecar in front of each (admission off, so every
 * rejection comes from the frontend's thresholds), and frontends reading the sidecars' pushed
 * load (--worker, no broker). Every status must be 200 or 529, and the rejection counter must
 * rise by exactly the number of 529s seen.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatBurst, SystemUnderTest, type Worker } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let workers: Worker[];
let model: string;

beforeAll(async () => {
  const engine = ['--num-gpu-blocks', '64', '--block-size', '4', '--prefill-tokens-per-s', '500', '--decode-step-ms', '10'];
  workers = [await sys.worker({ engine }), await sys.worker({ engine })];
  model = workers[0]!.engine.model;
});
afterAll(() => sys.stopAll());

async function frontendOver(extra: string[]) {
  const frontend = await sys.frontend([...workers.flatMap((w) => ['--worker', w.sidecar.address]), ...extra]);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know both workers');
  return frontend;
}

function only200And529(statuses: Map<number, number>): void {
  expect([...statuses.keys()].filter((s) => s !== 200 && s !== 529)).toEqual([]);
}

describe('busy rejection by thresholds (push load source)', () => {
  it('decode blocks over 0.2 of a 64-block KV: some 529s, only 200/529, and the rejection counter matches the 529s exactly', async () => {
    const frontend = await frontendOver(['--active-decode-blocks-threshold', '0.2']);
    const before = await frontend.metric('dynamo_frontend_model_rejection_total', { endpoint: 'chat_completions' });
    const statuses = await chatBurst(frontend, model, 48, 16);
    only200And529(statuses);
    expect(statuses.get(529) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
    const after = await frontend.metric('dynamo_frontend_model_rejection_total', { endpoint: 'chat_completions', model });
    expect(after - before).toBe(statuses.get(529));
    await frontend.stop();
  });

  it('active prefill tokens over 1: rejections while prompts are being prefilled', async () => {
    const frontend = await frontendOver(['--active-prefill-tokens-threshold', '1']);
    const statuses = await chatBurst(frontend, model, 48, 16);
    only200And529(statuses);
    expect(statuses.get(529) ?? 0).toBeGreaterThan(0);
    expect(await frontend.metric('dynamo_frontend_model_rejection_total', { model })).toBe(statuses.get(529));
    await frontend.stop();
  });

  it('no threshold: zero 529 under the same load', async () => {
    const frontend = await frontendOver([]);
    const statuses = await chatBurst(frontend, model, 48, 16);
    expect(statuses).toEqual(new Map([[200, 48]]));
    expect(await frontend.metric('dynamo_frontend_model_rejection_total')).toBe(0);
    await frontend.stop();
  });

  it('the frac check cannot fire without max_num_batched_tokens, and /busy_threshold says why; with it, it fires', async () => {
    const frontend = await frontendOver(['--active-prefill-tokens-threshold-frac', '0.001']);
    const statuses = await chatBurst(frontend, model, 24, 12);
    expect(statuses).toEqual(new Map([[200, 24]]));
    const listed = JSON.parse((await frontend.get('/busy_threshold')).body) as {
      thresholds: { model: string; diagnostics: { inactive_checks: { check: string; reason: string }[] } }[];
    };
    expect(listed.thresholds[0]!.diagnostics.inactive_checks).toEqual([
      expect.objectContaining({ check: 'active_prefill_tokens_threshold_frac', reason: 'max_num_batched_tokens unknown' }),
    ]);
    expect(frontend.stderr()).toContain('busy check cannot fire on this worker');
    await frontend.stop();

    // Same check over workers that publish max_num_batched_tokens (0.001 * 8192 = 8 tokens).
    const engine = ['--num-gpu-blocks', '64', '--block-size', '4', '--prefill-tokens-per-s', '500'];
    const published = [
      await sys.worker({ engine, sidecar: ['--max-num-batched-tokens', '8192'] }),
      await sys.worker({ engine, sidecar: ['--max-num-batched-tokens', '8192'] }),
    ];
    const withMax = await sys.frontend([...published.flatMap((w) => ['--worker', w.sidecar.address]), '--active-prefill-tokens-threshold-frac', '0.001']);
    await waitFor(async () => (await withMax.get('/ready')).status === 200, 'the frontend to know the workers');
    const fired = await chatBurst(withMax, model, 48, 16);
    only200And529(fired);
    expect(fired.get(529) ?? 0).toBeGreaterThan(0);
  });
});
