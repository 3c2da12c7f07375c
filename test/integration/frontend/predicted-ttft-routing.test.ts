/**
 * Predicted-TTFT routing end to end, with real processes: two simulated engines, one slow to its
 * first token (prefill at 50 tokens/s, so a 32-word prompt takes about 640 ms before its first
 * token; the other prefills at the default 50,000), a sidecar in front of each publishing
 * predicted_ttft_ms over its WorkerLoad push stream, and a frontend over both (--worker, no
 * broker). Requests go one at a time, so no worker ever has a call in flight when the next is
 * routed: once both predictions are known, --router-mode predicted-ttft must send most of them to
 * the fast worker, where least-loaded (the previous default), for contrast, splits them about
 * evenly (at a concurrency of 2 it too would favour the fast worker, the slow one holding its
 * call longer, and tell the modes apart no more). Counts and orderings only: no timing is asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatBurst, SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

const PREDICTION = 'dynamo_frontend_worker_predicted_ttft_seconds';
const sys = new SystemUnderTest();
let fast: Worker;
let slow: Worker;
let model: string;

beforeAll(async () => {
  const engine = ['--decode-step-ms', '5', '--max-output-tokens', '4'];
  fast = await sys.worker({ engine });
  slow = await sys.worker({ engine: [...engine, '--prefill-tokens-per-s', '50'] });
  model = fast.engine.model;
});
afterAll(() => sys.stopAll());

async function frontendOver(mode: string): Promise<FrontendProcess> {
  const frontend = await sys.frontend(['--router-mode', mode, '--worker', fast.sidecar.address, '--worker', slow.sidecar.address]);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know both workers');
  return frontend;
}

const served = async (worker: Worker): Promise<number> => (await worker.sidecar.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')) || 0;

async function workerId(worker: Worker): Promise<string> {
  const load = JSON.parse((await worker.sidecar.get('/load')).body) as { ranks: { worker_id: number }[] };
  return String(load.ranks[0]!.worker_id);
}

/** Sends `total` requests, `concurrency` at a time, and returns how many each worker served. */
async function burst(frontend: FrontendProcess, total: number, concurrency: number): Promise<{ fast: number; slow: number }> {
  const before = { fast: await served(fast), slow: await served(slow) };
  const statuses = await chatBurst(frontend, model, total, concurrency, { max_tokens: 4 });
  expect(statuses).toEqual(new Map([[200, total]]));
  // A sidecar counts a call once it has ended; the answer may reach the client first.
  let after = before;
  await waitFor(async () => {
    after = { fast: await served(fast), slow: await served(slow) };
    return after.fast - before.fast + after.slow - before.slow >= total;
  }, 'both sidecars to count every call');
  return { fast: after.fast - before.fast, slow: after.slow - before.slow };
}

describe('--router-mode predicted-ttft over a fast and a slow worker (push load source)', () => {
  it('sends most requests to the worker that predicts the sooner first token', async () => {
    const frontend = await frontendOver('predicted-ttft');
    const ids = { fast: await workerId(fast), slow: await workerId(slow) };
    const prediction = (id: string) => frontend.metric(PREDICTION, { worker_id: id });
    const known = async (id: string) =>
      (await frontend.get('/metrics')).body.split('\n').some((line) => line.startsWith(`${PREDICTION}{`) && line.includes(`worker_id="${id}"`));

    // Neither sidecar predicts before its first token: unknown predictions still get traffic
    // (no worker is starved), so one request at a time soon gives both a prediction.
    let warmups = 0;
    await waitFor(
      async () => {
        if ((await known(ids.fast)) && (await known(ids.slow))) return true;
        if (warmups >= 12) throw new Error(`no prediction from both workers after ${warmups} requests`);
        warmups++;
        expect((await frontend.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'word '.repeat(32) }], max_tokens: 4 })).status).toBe(
          200,
        );
        return false;
      },
      'a prediction from both workers',
      30_000,
    );
    // The premise: the slow engine's sidecar predicts the later first token.
    expect(await prediction(ids.fast)).toBeLessThan(await prediction(ids.slow));

    const split = await burst(frontend, 16, 1);
    expect(split.fast).toBeGreaterThan(split.slow);
    expect(split.fast).toBeGreaterThanOrEqual(13);
    await frontend.stop();
  });

  it('least-loaded over the same workers, one request at a time, gives the slow worker about half (the contrast)', async () => {
    const frontend = await frontendOver('least-loaded');
    const split = await burst(frontend, 8, 1);
    expect(split.slow).toBeGreaterThanOrEqual(3);
    await frontend.stop();
  });
});
