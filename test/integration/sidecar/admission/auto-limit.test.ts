/**
 * --engine-request-limit auto end to end: a real sidecar in front of the simulated engine, which
 * reports max_num_seqs per dp rank in its GetLoads (max_running_requests). The sidecar starts at
 * the fallback and takes ceil(1.5 x max_num_seqs x ranks) once the engine answers: in its gauge,
 * its load events, its admission-change counter and its log. The gate then holds that limit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUnderTest, type Worker } from '../../../support/system-processes.js';
import { waitFor } from '../../../support/wait.js';

const sys = new SystemUnderTest();
let worker: Worker;

beforeAll(async () => {
  worker = await sys.worker({
    engine: ['--max-num-seqs', '3', '--data-parallel-size', '2'],
    sidecarEnv: { DYN_ENGINE_REQUEST_LIMIT: 'auto', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' },
  });
});
afterAll(async () => {
  await sys.stopAll();
});

describe('--engine-request-limit auto', () => {
  it("takes ceil(1.5 x max_num_seqs x dp ranks) from the engine's GetLoads and reports it everywhere", async () => {
    const want = Math.ceil(1.5 * 3 * 2);
    await waitFor(async () => (await worker.sidecar.metric('dynamo_sidecar_engine_request_limit')) === want, `the limit gauge at ${want}`);
    expect(await worker.sidecar.metric('dynamo_sidecar_admission_changes_total', 'source="engine"')).toBe(1);
    const load = (await (await fetch(`http://127.0.0.1:${worker.sidecar.systemPort}/load`)).json()) as { ranks: { engine_request_limit: number }[] };
    // The sidecar was not told --data-parallel-size: it learned the engine's 2 ranks.
    expect(load.ranks.map((event) => event.engine_request_limit)).toEqual([want, want]);
    const line = worker.sidecar
      .stderr()
      .split('\n')
      .find((l) => l.includes('engine request limit from the engine'));
    expect(line, worker.sidecar.stderr()).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ engine_request_limit: want, max_running_requests: 6, round: 1 });
  });
});
