/**
 * SystemServer on 127.0.0.1:0 in process: every route and method, readiness with its reason, the
 * /metrics render cache by an injected clock, the admin route first, a failing route (500, logged),
 * the node timeouts it derives from its options, the first-request timer under fake timers, and
 * close (TLS reloader included, with a fake ServerTls). Timeouts over real time and real TLS are in
 * test/integration/sidecar/system/.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as HttpsServer } from 'node:https';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ServerTls } from '../../../../src/platform/tls/server-tls.js';
import { SystemServer, type SystemRoute, type SystemServerOptions } from '../../../../src/sidecar/system/system-server.js';
import { countingRegistry } from '../../../support/counting-registry.js';
import { recordingLogger } from '../../../support/recording-logger.js';

let server: SystemServer | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  vi.useRealTimers();
  for (const socket of sockets.splice(0)) socket.destroy();
  await server?.close();
  server = undefined;
});

async function start(over: Partial<SystemServerOptions> = {}) {
  const { registry, collects, set } = countingRegistry();
  const logger = recordingLogger();
  const readiness = { reason: undefined as string | undefined };
  const clock = { ms: 0 };
  let loads = 0;
  server = new SystemServer({
    registry,
    readiness: { notReadyReason: () => readiness.reason },
    load: () => ({ n: ++loads, worker: 'w1' }),
    logger,
    metricsCacheMs: 1000,
    now: () => clock.ms,
    ...over,
  });
  const port = await server.listen('127.0.0.1', 0);
  const url = (path: string) => `http://127.0.0.1:${port}${path}`;
  return { server, port, url, logger, readiness, clock, collects, set, registry };
}

async function get(url: string, init: RequestInit = {}): Promise<{ status: number; type: string | null; body: string }> {
  const response = await fetch(url, init);
  return { status: response.status, type: response.headers.get('content-type'), body: await response.text() };
}

/** The node server inside (private): to read the timeouts it was given. */
const nodeServer = (s: SystemServer): Server => (s as unknown as { server: Server }).server;

/** A raw TCP client, to see when the server closes the connection. */
async function openSocket(port: number): Promise<{ socket: Socket; closed: () => boolean; received: () => string }> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  let closed = false;
  let received = '';
  socket.on('close', () => (closed = true));
  socket.on('data', (d: Buffer) => (received += d.toString()));
  socket.on('error', () => {});
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, closed: () => closed, received: () => received };
}

/** Lets socket I/O run until `done` holds (bounded). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await new Promise((resolve) => setImmediate(resolve));
}

const json = (body: string): unknown => JSON.parse(body);

describe('SystemServer routes', () => {
  it('answers /live with 200 whatever the readiness', async () => {
    const { url, readiness } = await start();
    readiness.reason = 'worker draining';
    const answer = await get(url('/live'));
    expect(answer).toMatchObject({ status: 200, type: 'application/json' });
    expect(json(answer.body)).toEqual({ status: 'live' });
    expect(answer.body.endsWith('\n')).toBe(true);
  });

  it('answers /ready and /health 200 when ready and 503 with the reason when not, asking each time', async () => {
    const { url, readiness } = await start();
    for (const path of ['/ready', '/health', '/ready?verbose=1']) {
      readiness.reason = undefined;
      const ready = await get(url(path));
      expect([ready.status, json(ready.body)], path).toEqual([200, { status: 'ready' }]);
      readiness.reason = 'engine unreachable: ECONNREFUSED';
      const notReady = await get(url(path));
      expect([notReady.status, json(notReady.body)], path).toEqual([503, { status: 'not_ready', reason: 'engine unreachable: ECONNREFUSED' }]);
    }
  });

  it('answers /load with the load as JSON, read afresh for every request', async () => {
    const { url } = await start();
    expect(json((await get(url('/load'))).body)).toEqual({ n: 1, worker: 'w1' });
    expect(json((await get(url('/load'))).body)).toEqual({ n: 2, worker: 'w1' });
  });

  it('answers 404 for any other path, naming it and the endpoints there are', async () => {
    const { url } = await start();
    const answer = await get(url('/metrics/x?y=1'));
    expect(answer.status).toBe(404);
    expect(json(answer.body)).toEqual({ error: 'no such endpoint /metrics/x; try /metrics /live /ready /health /load' });
  });

  it('answers 405 for methods other than GET and HEAD, and HEAD with headers only', async () => {
    const { url } = await start();
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const answer = await get(url('/live'), { method });
      expect([answer.status, json(answer.body)], method).toEqual([405, { error: 'only GET and HEAD' }]);
    }
    const head = await get(url('/ready'), { method: 'HEAD' });
    expect(head).toEqual({ status: 200, type: 'application/json', body: '' });
  });
});

describe('SystemServer /metrics', () => {
  it("serves the registry's text with its content type", async () => {
    const { url, set, registry } = await start();
    set(42);
    const answer = await get(url('/metrics'));
    expect(answer.status).toBe(200);
    expect(answer.type).toBe(registry.contentType);
    expect(answer.body).toContain('test_value 42');
  });

  it('renders at most once per metricsCacheMs by its clock, serving the cached text in between', async () => {
    const { url, set, clock, collects, server } = await start({ metricsCacheMs: 1000 });
    set(1);
    expect((await get(url('/metrics'))).body).toContain('test_value 1');
    set(2);
    clock.ms = 999;
    expect((await get(url('/metrics'))).body).toContain('test_value 1');
    expect([collects(), server.metricsRenders]).toEqual([1, 1]);
    clock.ms = 1000;
    expect((await get(url('/metrics'))).body).toContain('test_value 2');
    expect([collects(), server.metricsRenders]).toEqual([2, 2]);
  });

  it('renders every scrape with a cache of 0', async () => {
    const { url, server } = await start({ metricsCacheMs: 0 });
    for (let i = 0; i < 3; i++) await get(url('/metrics'));
    expect(server.metricsRenders).toBe(3);
  });
});

describe('SystemServer admin route', () => {
  const admin = (calls: string[]): SystemRoute => ({
    handles: (u) => u?.startsWith('/admission') === true,
    serve: (req: IncomingMessage, res: ServerResponse) => {
      calls.push(`${req.method} ${req.url}`);
      res.writeHead(204).end();
      return Promise.resolve();
    },
  });

  it('hands its paths to the admin API, any method, before its own routes and their 405', async () => {
    const calls: string[] = [];
    const { url } = await start({ admin: admin(calls) });
    expect((await get(url('/admission'), { method: 'PUT', body: '{}' })).status).toBe(204);
    expect((await get(url('/admission?x=1'))).status).toBe(204);
    expect(calls).toEqual(['PUT /admission', 'GET /admission?x=1']);
    expect((await get(url('/live'))).status).toBe(200);
    expect(calls).toHaveLength(2);
  });
});

describe('SystemServer failures', () => {
  it('answers 500 with the error when a route fails, and logs the path and the error', async () => {
    const { url, logger } = await start({
      load: () => {
        throw new Error('load state unavailable');
      },
    });
    const answer = await get(url('/load'));
    expect([answer.status, json(answer.body)]).toEqual([500, { error: 'load state unavailable' }]);
    expect(logger.find('system endpoint failed', 'error')).toEqual([
      { level: 'error', msg: 'system endpoint failed', fields: { path: '/load', error: 'load state unavailable' } },
    ]);
  });

  it('answers 500 when rendering the metrics fails, and renders again at the next scrape', async () => {
    const { registry } = countingRegistry();
    let fail = true;
    const metrics = registry.metrics.bind(registry);
    registry.metrics = () => (fail ? Promise.reject(new Error('collector broke')) : metrics());
    const { url } = await start({ registry, metricsCacheMs: 60_000 });
    expect(await get(url('/metrics'))).toMatchObject({ status: 500, body: '{"error":"collector broke"}\n' });
    fail = false;
    expect((await get(url('/metrics'))).status).toBe(200);
  });

  it('destroys the connection when a route fails after its headers were sent', async () => {
    const { url, logger } = await start({
      admin: {
        handles: () => true,
        serve: (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('partial');
          return Promise.reject(new Error('mid-answer'));
        },
      },
    });
    await expect(fetch(url('/x')).then((r) => r.text())).rejects.toThrow();
    expect(logger.find('system endpoint failed')).toHaveLength(1);
  });
});

describe('SystemServer timeouts', () => {
  it('sets node timeouts from its options: keep-alive less the 1 s node adds, handshake for headers and request', async () => {
    const { server } = await start({ idleTimeoutMs: 5000, handshakeTimeoutMs: 2000 });
    const node = nodeServer(server);
    expect(node.keepAliveTimeout).toBe(4000);
    expect(node.timeout).toBe(5000);
    expect(node.headersTimeout).toBe(2000);
    expect(node.requestTimeout).toBe(2000);
  });

  it('turns the idle timeouts off with 0, and keeps a sub-second keep-alive positive', async () => {
    const off = await start({ idleTimeoutMs: 0 });
    expect([nodeServer(off.server).keepAliveTimeout, nodeServer(off.server).timeout]).toEqual([0, 0]);
    await off.server.close();
    const short = await start({ idleTimeoutMs: 500 });
    expect(nodeServer(short.server).keepAliveTimeout).toBe(1);
  });

  it('defaults to the idle and handshake timeouts of the sidecar options (300 s, 10 s)', async () => {
    const { server } = await start();
    const node = nodeServer(server);
    expect([node.timeout, node.keepAliveTimeout, node.headersTimeout]).toEqual([300_000, 299_000, 10_000]);
  });

  it('closes a connection that starts no request within the handshake timeout', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { port, server } = await start({ handshakeTimeoutMs: 2000 });
    const connected = new Promise((resolve) => nodeServer(server).once('connection', resolve));
    const client = await openSocket(port);
    await connected;
    vi.advanceTimersByTime(1999);
    await new Promise((resolve) => setImmediate(resolve));
    expect(client.closed()).toBe(false);
    vi.advanceTimersByTime(1);
    await new Promise((resolve) => client.socket.once('close', resolve));
    expect(client.received()).toBe('');
  });

  it('keeps a connection whose first request came in time, past the handshake timeout', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { port } = await start({ handshakeTimeoutMs: 2000 });
    const client = await openSocket(port);
    client.socket.write('GET /live HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => client.received().includes('"live"'));
    expect(client.received()).toMatch(/^HTTP\/1\.1 200/);
    vi.advanceTimersByTime(10_000);
    await until(() => client.closed()); // gives a close, if one came, time to arrive
    expect(client.closed()).toBe(false);
  });
});

describe('SystemServer listen and close', () => {
  it('rejects listening on a port already taken', async () => {
    const { port } = await start();
    const other = new SystemServer({
      registry: countingRegistry().registry,
      readiness: { notReadyReason: () => undefined },
      load: () => ({}),
      logger: recordingLogger(),
      metricsCacheMs: 0,
    });
    await expect(other.listen('127.0.0.1', port)).rejects.toThrow(/EADDRINUSE/);
  });

  it('closes with keep-alive connections open, and stops listening', async () => {
    const { port, server } = await start();
    const client = await openSocket(port);
    client.socket.write('GET /live HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => client.received().includes('"live"'));
    await server.close();
    await new Promise((resolve) => (client.closed() ? resolve(undefined) : client.socket.once('close', resolve)));
    await expect(fetch(`http://127.0.0.1:${port}/live`)).rejects.toThrow();
  });

  it('with TLS, hands the https server to the certificate keeper and stops it at close', async () => {
    const served: unknown[] = [];
    let closes = 0;
    const tls = { serverOptions: {}, serve: (s: unknown) => served.push(s), close: () => closes++ } as unknown as ServerTls;
    const { server } = await start({ tls });
    expect(served).toEqual([nodeServer(server)]);
    expect(nodeServer(server)).toBeInstanceOf(HttpsServer);
    await server.close();
    expect(closes).toBe(1);
  });
});
