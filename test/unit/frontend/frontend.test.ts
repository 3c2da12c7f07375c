/**
 * startFrontend in process against a sidecar stand-in (grpc-js on 127.0.0.1:0 serving
 * WorkerLoad.Watch and VllmEngine.Generate): the parts are wired to each other (a threshold set
 * through the admin API is what the router judges by), it listens on port 0, and close() is
 * one shutdown however often it is called.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequestMessage } from '../../../src/protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../../src/protocol/engine/engine-services.js';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { NoLoadSourceError, startFrontend, type RunningFrontend } from '../../../src/frontend/frontend.js';
import { workerLoadClientCtor } from '../../../src/frontend/sources/push-source.js';
import { recordingLogger } from '../../support/recording-logger.js';
import { waitFor } from '../../support/wait.js';

type Watch = grpc.ServerWritableStream<object, { ranks: object[] }>;

let server: grpc.Server;
let address: string;
/** Watch streams open now; the stand-in pushes a load snapshot only when `pushLoad` is set. */
const watches = new Set<Watch>();
let pushLoad = true;
const generated: GenerateRequestMessage[] = [];
const RANK = { worker_id: 7, dp_rank: 0, model: 'm', heartbeat_ms: 60_000, active_prefill_tokens: 50 };

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(workerLoadClientCtor().service, {
    Watch: (call: Watch) => {
      watches.add(call);
      call.on('cancelled', () => watches.delete(call));
      if (pushLoad) call.write({ ranks: [RANK] });
    },
  });
  server.addService(vllmEngineService().service, {
    Generate(call: grpc.ServerWritableStream<GenerateRequestMessage, unknown>) {
      generated.push(call.request);
      call.write({ chunk: { token_ids: [104, 105], prompt_tokens: 1, completion_tokens: 2, cached_tokens: 0 } });
      call.write({ complete: { output_ids: [104, 105], finish_reason: 'stop', prompt_tokens: 1, completion_tokens: 2, cached_tokens: 0 } });
      call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
});
afterAll(() => {
  server?.forceShutdown();
});

let running: RunningFrontend | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
  pushLoad = true;
});

async function start(flags: Record<string, string | string[]> = {}): Promise<RunningFrontend> {
  const config = parseFrontendConfig({ httpHost: '127.0.0.1', httpPort: '0', workers: [address], ...flags }, {});
  running = await startFrontend(config, { logger: recordingLogger() });
  return running;
}

const url = (port: number, path: string) => `http://127.0.0.1:${port}${path}`;
const completion = (port: number) =>
  fetch(url(port, '/v1/completions'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt: 'hi' }) });

describe('startFrontend', () => {
  it('refuses to start with no --worker and no NATS', async () => {
    const config = parseFrontendConfig({ httpHost: '127.0.0.1', httpPort: '0' }, {});
    await expect(startFrontend(config, { logger: recordingLogger() })).rejects.toBeInstanceOf(NoLoadSourceError);
  });

  it('is not ready, with the reason, until a worker pushed its load', async () => {
    pushLoad = false;
    const frontend = await start();
    await waitFor(() => watches.size === 1, 'the load stream to open');
    const res = await fetch(url(frontend.port, '/ready'));
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'not ready', reason: 'no worker known yet' });
    for (const watch of watches) watch.write({ ranks: [RANK] });
    await waitFor(() => frontend.router.ready(), 'the worker to be known');
    expect((await fetch(url(frontend.port, '/ready'))).status).toBe(200);
  });

  it('routes a completion to the worker that pushed its load, and judges it by the thresholds the admin API set', async () => {
    const frontend = await start();
    expect(frontend.port).toBeGreaterThan(0);
    await waitFor(() => frontend.router.ready(), 'the worker to be known');
    const ok = await completion(frontend.port);
    expect(ok.status).toBe(200);
    const decoder = frontend.tokenizer.decoder();
    const text = decoder.push([104, 105]) + decoder.flush();
    expect(await ok.json()).toMatchObject({ object: 'text_completion', model: 'm', choices: [{ text, finish_reason: 'stop' }] });
    expect(generated.at(-1)).toMatchObject({ tokenized: { original_text: '', input_ids: frontend.tokenizer.encode('hi') }, data_parallel_rank: 0 });

    const set = await fetch(url(frontend.port, '/busy_threshold'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', active_prefill_tokens_threshold: 10 }),
    });
    expect(set.status).toBe(200);
    // The worker reports 50 prefill tokens: over the new threshold, so the very next request is refused.
    const refused = await completion(frontend.port);
    expect(refused.status).toBe(529);
    expect(await refused.json()).toMatchObject({ details: { workers: 1, busy: 1, checks: { active_prefill_tokens_threshold: 1 } } });
  });

  it('serves the admin API on its own port with --admin-address', async () => {
    const frontend = await start({ adminAddress: '127.0.0.1:0' });
    expect(frontend.adminPort).toBeGreaterThan(0);
    expect((await fetch(url(frontend.adminPort!, '/busy_threshold'))).status).toBe(200);
    expect((await fetch(url(frontend.port, '/busy_threshold'))).status).toBe(404);
  });

  it('closes once however often close() is called: the port stops answering and the load stream is cancelled', async () => {
    const frontend = await start();
    await waitFor(() => watches.size === 1, 'the load stream to open');
    const first = frontend.close();
    expect(frontend.close()).toBe(first);
    await first;
    running = undefined;
    await expect(fetch(url(frontend.port, '/live'))).rejects.toThrow();
    await waitFor(() => watches.size === 0, 'the load stream to be cancelled');
  });
});
