// A client that leaves (socket closed) cancels its worker call at once and ends InFlight, streaming or not.
import { request as httpRequest, type ClientRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../support/wait.js';
import { hangs, metricValue, testApp, type FakeCall, type TestApp } from '../../../support/frontend-fakes.js';

let t: TestApp;
let client: ClientRequest | undefined;
afterEach(async () => {
  client?.destroy();
  await t?.app.close();
});

async function listen(): Promise<number> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

/** Sends a chat request; resolves with the request and everything received so far (kept up to date). */
function send(port: number, body: Record<string, unknown>): { received: { text: string; status?: number | undefined } } {
  const received: { text: string; status?: number | undefined } = { text: '' };
  const payload = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], ...body });
  client = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } }, (res) => {
    received.status = res.statusCode;
    res.on('data', (d: Buffer) => (received.text += d.toString()));
    res.on('error', () => {});
  });
  client.on('error', () => {});
  client.end(payload);
  return { received };
}

const chunk = (call: FakeCall, id: number) => call.send({ chunk: { token_ids: [id], prompt_tokens: 0, completion_tokens: 1, cached_tokens: 0 } });

describe('a client that disconnects', () => {
  it('mid-stream: the worker call is cancelled, InFlight ends once, and the request counts as 499', async () => {
    t = testApp();
    t.workers.defaultScript = (call) => void setTimeout(() => chunk(call, 1), 0);
    const port = await listen();
    const { received } = send(port, { stream: true });
    await waitFor(() => received.text.includes('"content":"of "'), 'the first token at the client');
    expect(t.workers.calls[0]!.cancelled).toBe(false);
    client!.destroy();
    await waitFor(() => t.workers.calls[0]!.cancelled, 'the worker call cancelled');
    await waitFor(() => t.router.inflight[0]!.ends === 1, 'InFlight ended');
    await waitFor(async () => (await metricValue(t.registry, 'dynamo_frontend_requests_total', { status: '499' })) === 1, 'a 499 counted');
    expect(await metricValue(t.registry, 'dynamo_frontend_inflight_requests', { model: 'm1' })).toBe(0);
    expect(t.router.inflight[0]!.ends).toBe(1);
  });

  it('while waiting for a whole answer: the worker call is cancelled before any output', async () => {
    t = testApp();
    t.workers.defaultScript = hangs;
    const port = await listen();
    send(port, {});
    await waitFor(() => t.workers.calls.length === 1, 'the worker call');
    client!.destroy();
    await waitFor(() => t.workers.calls[0]!.cancelled, 'the worker call cancelled');
    await waitFor(() => t.router.inflight[0]!.ends === 1, 'InFlight ended');
    expect(t.router.refused).toEqual([]);
    expect(t.workers.calls).toHaveLength(1);
  });

  it('while generating a whole answer: the call is cancelled after output started too', async () => {
    t = testApp();
    t.workers.defaultScript = (call) => void setTimeout(() => chunk(call, 1), 0);
    const port = await listen();
    send(port, {});
    await waitFor(() => t.router.inflight[0]?.outputTokens === 1, 'output at the frontend');
    client!.destroy();
    await waitFor(() => t.workers.calls[0]!.cancelled, 'the worker call cancelled');
    await waitFor(() => t.router.inflight[0]!.ends === 1, 'InFlight ended');
  });
});
