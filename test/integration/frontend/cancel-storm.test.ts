/**
 * One client's cancels must not cost other clients their streams (issue 20, item 1). The
 * frontend shares one HTTP/2 connection per sidecar, so a client that sends hundreds of
 * streaming requests and drops each a moment later makes the frontend reset hundreds of calls
 * on that connection: what the sidecar's Rapid Reset rule looks for. When the rule fires it
 * takes no new calls on the connection gracefully (GOAWAY NO_ERROR with the last stream it
 * processed): the calls already running finish, and the frontend's client retries the refused
 * ones on a new connection.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUnderTest, type FrontendProcess, type Worker } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

const sys = new SystemUnderTest();
let worker: Worker;
let frontend: FrontendProcess;
let model: string;

beforeAll(async () => {
  worker = await sys.worker({ sidecarEnv: { DYN_ENGINE_REQUEST_LIMIT: '1000', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '100' } });
  model = worker.engine.model;
  frontend = await sys.frontend(['--worker', worker.sidecar.address]);
  await waitFor(async () => (await frontend.get('/ready')).status === 200, 'the frontend to know the worker');
});
afterAll(async () => {
  await sys.stopAll();
});

/** A streaming chat completion read to its end: the SSE body. */
async function streamedChat(maxTokens: number): Promise<string> {
  const res = await frontend.post(
    '/v1/chat/completions',
    { model, messages: [{ role: 'user', content: 'tell me a long story' }], max_tokens: maxTokens, stream: true },
    {
      signal: AbortSignal.timeout(60_000),
    },
  );
  expect(res.status).toBe(200);
  return res.body;
}

/** Sends a streaming request and drops its connection `afterMs` later; resolves once dropped. */
function sendAndDrop(afterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 200, stream: true });
    const req = httpRequest(`${frontend.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      agent: false,
    });
    req.on('error', () => {});
    req.on('close', () => resolve());
    req.end(body);
    setTimeout(() => req.destroy(), afterMs);
  });
}

/** Storm batches at most; the rule normally fires within the first 20 (about 1 s). */
const MAX_STORM_BATCHES = 100;

describe('a cancel storm through the frontend', () => {
  it('leaves the streams of other clients whole, and nothing in flight afterwards', async () => {
    // Long enough (about 8 s at the engine's pace) to outlast the longest storm below, so they are
    // on the shared connection when the rule fires.
    let innocentDone = 0;
    const innocent = Array.from({ length: 4 }, () =>
      streamedChat(400).finally(() => {
        innocentDone++;
      }),
    );
    // Failures are read below; until then no rejection may go unhandled if an assertion fails first.
    for (const stream of innocent) stream.catch(() => {});
    // Batches of 18 requests every 50 ms (about 360 a second), each dropped 2 ms after it was sent,
    // until the sidecar sheds the shared connection: a loaded machine's frontend forwards fewer of
    // them before their client is gone, so the storm lasts until enough have reached the sidecar.
    const drops: Promise<void>[] = [];
    const shed = () => worker.sidecar.stderr().includes('Rapid Reset');
    for (let batch = 0; batch < MAX_STORM_BATCHES && !shed(); batch++) {
      for (let i = 0; i < 18; i++) drops.push(sendAndDrop(2));
      // Deliberate pacing of the storm, not a wait for a condition.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await Promise.all(drops);
    // On the wire the relayed storm is the slow Rapid Reset: the rule fires, and this test is
    // about what that then costs everyone else.
    await waitFor(() => shed(), 'the sidecar to shed the shared connection (Rapid Reset)', 5_000);
    expect(innocentDone, 'innocent streams that had ended before the shed (the test then proves nothing)').toBe(0);
    const bodies = await Promise.all(innocent);
    for (const body of bodies) {
      expect(body, 'an innocent stream ended with an error event').not.toContain('"error"');
      expect(body.trimEnd().endsWith('data: [DONE]'), `an innocent stream did not finish: ...${body.slice(-300)}`).toBe(true);
      expect(body).toContain('"finish_reason":"length"');
    }
    await waitFor(async () => (await frontend.metric('dynamo_frontend_inflight_requests')) === 0, 'the frontend to have nothing in flight', 10_000);
    await waitFor(async () => (await worker.sidecar.metric('dynamo_engine_request')) === 0, 'the engine to hold no call', 10_000);
    expect((await frontend.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 4 })).status).toBe(200);
  });
});
