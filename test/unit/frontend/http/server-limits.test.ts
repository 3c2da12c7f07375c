// The HTTP listener's limits (node's requestTimeout, headersTimeout, maxConnections), over a real socket with short values.
import { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { serverTimeouts } from '../../../../src/frontend/http/server-limits.js';
import { silentLogger } from '../../../../src/platform/log.js';
import { ServerTls } from '../../../../src/platform/tls/server-tls.js';
import { TlsMetrics } from '../../../../src/platform/tls/tls-metrics.js';
import { fixturePki } from '../../../support/fixture-pki.js';
import { metricValue, sseEvents, streams, TEST_OPTIONS, testApp, type TestApp } from '../../../support/frontend-fakes.js';
import { jsonRequest, rawRequest, RawHttp1 } from '../../../support/raw-http1.js';
import { waitFor } from '../../../support/wait.js';

let t: TestApp;
const sockets: RawHttp1[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await t?.app.close();
});

async function listening(limits: Partial<typeof TEST_OPTIONS.limits>): Promise<number> {
  t = testApp({ options: { limits: { ...TEST_OPTIONS.limits, ...limits } } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

async function open(port: number): Promise<RawHttp1> {
  const socket = await RawHttp1.connect(port);
  sockets.push(socket);
  return socket;
}

const timeoutBody = { message: expect.any(String), type: 'RequestTimeout', code: 408 };

describe('the receive timeout', () => {
  it('cuts a body sent a byte at a time with 408 in the one error shape, closes the connection and ends the request', async () => {
    const port = await listening({ receiveTimeoutMs: 400, headersTimeoutMs: 200 });
    const socket = await open(port);
    const started = Date.now();
    socket.write(rawRequest('POST', '/v1/completions', { 'content-type': 'application/json', 'content-length': 50_000 }));
    void socket.drip('{"model":"m1","prompt":"' + 'x'.repeat(200), 20);
    const response = await socket.response(3000);
    expect(response.status).toBe(408);
    expect(JSON.parse(response.body)).toEqual({ ...timeoutBody, error: timeoutBody });
    await socket.closed();
    expect(Date.now() - started).toBeLessThan(2000);
    expect(t.workers.calls).toHaveLength(0);
    expect((await metricValue(t.registry, 'dynamo_frontend_inflight_requests')) ?? 0).toBe(0);
  });

  it('never cuts an answer: an SSE stream running well past it completes', async () => {
    const port = await listening({ receiveTimeoutMs: 200, headersTimeoutMs: 100 });
    t.workers.defaultScript = streams([1, 2, 3, 4, 5, 6, 7, 8], 'length', 100);
    const socket = await open(port);
    socket.write(jsonRequest('POST', '/v1/completions', { model: 'm1', prompt: 'hi', stream: true }));
    const response = await socket.response(5000);
    expect(response.status).toBe(200);
    const events = sseEvents(response.body);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.length).toBeGreaterThanOrEqual(9);
  });
});

describe('the headers timeout', () => {
  it('cuts headers sent a byte at a time with 408, long before the receive timeout', async () => {
    const port = await listening({ receiveTimeoutMs: 5000, headersTimeoutMs: 200 });
    const socket = await open(port);
    const started = Date.now();
    void socket.drip(rawRequest('GET', '/v1/models', { 'x-slow': 'a'.repeat(500) }), 20);
    const response = await socket.response(3000);
    expect(response.status).toBe(408);
    await socket.closed();
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('closes a connection that sends nothing', async () => {
    const port = await listening({ receiveTimeoutMs: 5000, headersTimeoutMs: 200 });
    const socket = await open(port);
    await socket.closed(3000);
  });
});

describe('the connection cap', () => {
  it('closes connections beyond it unanswered and counts them; a freed place serves again', async () => {
    const port = await listening({ maxConnections: 2 });
    const held = [await open(port), await open(port)];
    await waitFor(async () => (await connections()) === 2, 'both connections accepted');
    const refused = await open(port);
    await refused.closed();
    expect(refused.text).toBe('');
    expect(await metricValue(t.registry, 'dynamo_frontend_http_connections_dropped_total')).toBe(1);
    held[0]!.destroy();
    await waitFor(async () => (await connections()) < 2, 'a place to be freed');
    const next = await open(port);
    next.write(rawRequest('GET', '/v1/models'));
    expect((await next.response()).status).toBe(200);
  });
});

const connections = () => new Promise<number>((resolve) => t.app.server.getConnections((_err, n) => resolve(n)));

describe('over HTTPS', () => {
  it('the listener has the same timeouts and cap', () => {
    const pki = fixturePki();
    try {
      const metrics = new TlsMetrics(new Registry(), 'dynamo_frontend');
      const tls = ServerTls.load({ certFile: pki.server.certFile, keyFile: pki.server.keyFile, caFile: undefined }, 'http', {
        intervalMs: 0,
        logger: silentLogger,
        metrics,
      });
      t = testApp({ tls, options: { limits: { receiveTimeoutMs: 400, headersTimeoutMs: 200, maxConnections: 3 } } });
      expect(t.app.server).toBeInstanceOf(HttpsServer);
      const server = t.app.server as HttpsServer;
      expect([server.requestTimeout, server.headersTimeout, server.maxConnections]).toEqual([400, 200, 3]);
    } finally {
      pki.remove();
    }
  });
});

describe('serverTimeouts', () => {
  it('checks for expired requests often enough to cut within a quarter of the shortest timeout, at most every second', () => {
    expect(serverTimeouts({ receiveTimeoutMs: 60_000, headersTimeoutMs: 10_000, maxConnections: 0 })).toEqual({
      requestTimeout: 60_000,
      headersTimeout: 10_000,
      connectionsCheckingInterval: 1000,
    });
    expect(serverTimeouts({ receiveTimeoutMs: 400, headersTimeoutMs: 0, maxConnections: 0 }).connectionsCheckingInterval).toBe(100);
    expect(serverTimeouts({ receiveTimeoutMs: 0, headersTimeoutMs: 0, maxConnections: 0 })).toEqual({ requestTimeout: 0, headersTimeout: 0 });
  });
});
