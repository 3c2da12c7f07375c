/**
 * A client that stops reading an SSE stream: the frontend waits for the socket to drain (no
 * unbounded buffering), and when that client then goes away the wait must end too, so the
 * worker call is cancelled and the router's in-flight count ends (a leak would skew routing
 * for ever and keep the handler alive).
 */
import { request as httpRequest, type ClientRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../support/wait.js';
import { metricValue, testApp, type FakeCall, type TestApp } from '../../../support/frontend-fakes.js';

let t: TestApp;
let client: ClientRequest | undefined;
afterEach(async () => {
  client?.destroy();
  await t?.app.close();
});

/** Streams one token per message, yielding between batches, until cancelled or `limit` sent. */
const firehose =
  (limit: number) =>
  async (call: FakeCall): Promise<void> => {
    for (let i = 0; i < limit && !call.ended; i++) {
      call.send({ chunk: { token_ids: [i % 64], prompt_tokens: 0, completion_tokens: i + 1, cached_tokens: 0 } });
      if (i % 500 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
  };

describe('a client that stops reading a stream', () => {
  it('holds the frontend at the socket (bounded), and leaving then ends the call and its in-flight count', async () => {
    t = testApp();
    const responses: ServerResponse[] = [];
    t.app.addHook('onRequest', (_request, reply, done) => {
      responses.push(reply.raw);
      done();
    });
    t.workers.defaultScript = firehose(2_000_000);
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (t.app.server.address() as AddressInfo).port;

    client = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } }, (res) => {
      res.pause(); // never reads
      res.on('error', () => {});
    });
    client.on('error', () => {});
    client.end(JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true }));

    await waitFor(() => responses[0]?.writableNeedDrain === true, 'the frontend to wait for the socket to drain', 20_000);
    expect(t.router.inflight[0]!.ends).toBe(0);
    client.destroy();
    await waitFor(() => t.workers.calls[0]!.cancelled, 'the worker call cancelled', 5_000);
    await waitFor(() => t.router.inflight[0]!.ends === 1, 'InFlight ended', 5_000);
    await waitFor(async () => (await metricValue(t.registry, 'dynamo_frontend_requests_total', { status: '499' })) === 1, 'a 499 counted', 5_000);
  });
});
