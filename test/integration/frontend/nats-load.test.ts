/**
 * The NATS load source end to end: sidecars publish their load to a real nats-server; two
 * frontends read it from NATS and a third gets the same sidecars' load pushed (--worker). All
 * three must make the same busy decisions for the same traffic, and a NATS outage under load must
 * not stop routing (unknown load is free; the sidecars' caps still protect the engines).
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServerHandle } from '../../support/nats-server.js';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { engineClient, startGenerate, tokens } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let nats: NatsServerHandle;
let workers: Worker[];
let model: string;
const clients: grpc.Client[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  const engine = ['--num-gpu-blocks', '64', '--block-size', '16', '--decode-step-ms', '50'];
  // A 1 s heartbeat: a NATS worker is forgotten after 10 s of silence, longer than the outage below.
  const sidecar = ['--nats-url', nats.url, '--load-heartbeat-ms', '1000'];
  workers = [await sys.worker({ engine, sidecar }), await sys.worker({ engine, sidecar })];
  model = workers[0]!.engine.model;
});
afterAll(async () => {
  for (const c of clients) c.close();
  await sys.stopAll();
  await nats?.stop();
});

async function ready(frontend: FrontendProcess): Promise<FrontendProcess> {
  await waitFor(async () => (await frontend.metric('dynamo_frontend_workers', { model })) === 2, 'the frontend to know both workers', 15_000, 50);
  return frontend;
}

const chat = (frontend: FrontendProcess) =>
  frontend.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 });

describe('load from NATS', () => {
  it('two NATS frontends and a push frontend make the same busy decisions for the same traffic', async () => {
    const threshold = ['--active-decode-blocks-threshold', '0.1'];
    const frontends = [
      await ready(await sys.frontend(['--nats-url', nats.url, ...threshold])),
      await ready(await sys.frontend(['--nats-url', nats.url, ...threshold])),
      await ready(await sys.frontend([...workers.flatMap((w) => ['--worker', w.sidecar.address]), ...threshold])),
    ];
    for (const f of frontends) expect(await f.metric('dynamo_frontend_busy_workers', { model })).toBe(0);

    // Fill worker 0's KV past 0.1 of 64 blocks (a 128-token prompt is 8 blocks of 16) with one call
    // sent to its sidecar directly, decoding for up to 40 s (800 tokens at 50 ms, within the 1024-token
    // context): far longer than this test, which cancels it, even on a slow machine.
    const client = engineClient(workers[0]!.sidecar.address);
    clients.push(client);
    const calls = [
      startGenerate(client, {
        request_id: 'fill',
        tokenized: { original_text: '', input_ids: tokens(128) },
        sampling_params: { max_tokens: 800, ignore_eos: true },
        stream: true,
      }),
    ];
    calls.forEach((c) => c.on('error', () => {}));
    for (const f of frontends)
      await waitFor(async () => (await f.metric('dynamo_frontend_busy_workers', { model })) === 1, 'worker 0 to be busy at every frontend', 15_000, 50);

    // Every frontend sends everything to worker 1, and none refuses: worker 1 is free.
    const served = async (): Promise<number> => (await workers[1]!.sidecar.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')) || 0;
    const before = await served();
    for (const f of frontends) for (let i = 0; i < 3; i++) expect((await chat(f)).status).toBe(200);
    // The sidecar counts a call when its trailers pass, a moment after the frontend answered.
    await waitFor(async () => (await served()) - before === 9, 'worker 1 to have served all nine', 5000, 20);
    const busyWorker = (await frontends[0]!.get('/metrics')).body.match(/dynamo_frontend_worker_active_decode_blocks\{worker_id="(\d+)"/g);
    expect(busyWorker?.length).toBe(2);

    calls.forEach((c) => c.cancel());
    for (const f of frontends)
      await waitFor(async () => (await f.metric('dynamo_frontend_busy_workers', { model })) === 0, 'worker 0 to be free again at every frontend', 15_000, 50);
    await Promise.all(frontends.map((f) => f.stop()));
  });

  it('NATS killed and restarted under load: routing goes on, and events resume after the restart', async () => {
    const frontend = await ready(await sys.frontend(['--nats-url', nats.url]));
    const statuses = new Map<number, number>();
    let running = true;
    const lane = async (): Promise<void> => {
      for (let i = 0; running && i < 500; i++) {
        const res = await chat(frontend);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    };
    const lanes = Promise.all([lane(), lane(), lane()]);
    try {
      await waitFor(() => (statuses.get(200) ?? 0) >= 5, 'requests to flow');
      await nats.stop();
      await waitFor(
        async () => (await frontend.metric('dynamo_frontend_load_source_connected', { source: 'nats' })) === 0,
        'the frontend to see NATS gone',
        15_000,
        50,
      );
      const during = statuses.get(200) ?? 0;
      await waitFor(() => (statuses.get(200) ?? 0) >= during + 10, 'requests to keep flowing without NATS', 15_000, 20);
      await nats.restart();
      const eventsAtRestart = await frontend.metric('dynamo_frontend_load_events_total', { source: 'nats', result: 'applied' });
      await waitFor(
        async () => (await frontend.metric('dynamo_frontend_load_events_total', { source: 'nats', result: 'applied' })) >= eventsAtRestart + 4,
        'load events to resume',
        20_000,
        100,
      );
    } finally {
      running = false;
      await lanes;
    }
    expect([...statuses.keys()]).toEqual([200]);
    expect(await frontend.metric('dynamo_frontend_workers', { model })).toBe(2);
  });
});
