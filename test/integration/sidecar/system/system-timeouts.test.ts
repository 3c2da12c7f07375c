/**
 * The system port under hostile or careless clients: a scrape flood costs one render per cache
 * interval, idle connections are closed after the idle timeout, a slow-drip (slowloris) request
 * is closed after the handshake timeout, and a normal keep-alive client keeps working.
 */
import { connect, type Socket } from 'node:net';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/platform/log.js';
import { SystemServer, type SystemServerOptions } from '../../../../src/sidecar/system/system-server.js';
import { waitFor } from '../../../support/wait.js';
import { countingRegistry } from '../../../support/counting-registry.js';

const servers: SystemServer[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(options: Partial<SystemServerOptions> = {}): Promise<number> {
  const server = new SystemServer({
    registry: new Registry(),
    readiness: { notReadyReason: () => undefined },
    load: () => ({}),
    logger: silentLogger,
    metricsCacheMs: 0,
    ...options,
  });
  servers.push(server);
  return server.listen('127.0.0.1', 0);
}

/** A raw socket that records what it receives and when it closes. */
async function rawSocket(port: number): Promise<{ socket: Socket; received: () => string; closedAt: () => number | undefined }> {
  const socket = connect({ host: '127.0.0.1', port });
  sockets.push(socket);
  let received = '';
  let closedAt: number | undefined;
  socket.on('data', (d) => (received += d.toString('latin1')));
  socket.on('error', () => {});
  socket.on('close', () => (closedAt = Date.now()));
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, received: () => received, closedAt: () => closedAt };
}

const GET_LIVE = 'GET /live HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n';
const responses = (text: string): number => text.split('HTTP/1.1 200').length - 1;

describe('/metrics cache', () => {
  it('renders once for a flood of concurrent scrapes and refreshes after the interval', async () => {
    const { registry, collects, set } = countingRegistry();
    let now = 0;
    const port = await start({ registry, metricsCacheMs: 1000, now: () => now });
    const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    set(1);
    const texts = await Promise.all(Array.from({ length: 40 }, scrape));
    expect(texts.every((t) => t.includes('test_value 1'))).toBe(true);
    expect(collects()).toBe(1);
    set(2);
    expect(await scrape()).toContain('test_value 1');
    now = 1000;
    expect(await scrape()).toContain('test_value 2');
    expect(collects()).toBe(2);
  });
});

describe('system port timeouts', () => {
  it('closes a connection that never starts a request within the handshake timeout, and keeps one that does', async () => {
    const port = await start({ idleTimeoutMs: 60_000, handshakeTimeoutMs: 300 });
    const silent = await rawSocket(port);
    const talking = await rawSocket(port);
    talking.socket.write(GET_LIVE);
    await waitFor(() => silent.closedAt() !== undefined, 'the silent connection to be closed', 5000);
    expect(talking.closedAt(), 'a connection that sent a request is not closed by the handshake timer').toBeUndefined();
    talking.socket.write(GET_LIVE);
    await waitFor(() => responses(talking.received()) === 2, 'a second answer on the kept connection', 5000);
  });

  it('closes a keep-alive connection left idle for the idle timeout', async () => {
    const port = await start({ idleTimeoutMs: 300, handshakeTimeoutMs: 10_000 });
    const c = await rawSocket(port);
    const t0 = Date.now();
    c.socket.write(GET_LIVE);
    await waitFor(() => responses(c.received()) === 1, 'the response');
    await waitFor(() => c.closedAt() !== undefined, 'the idle connection to be closed', 5000);
    expect(c.closedAt()! - t0).toBeGreaterThanOrEqual(250);
  });

  it('never closes an idle connection when the idle timeout is 0', async () => {
    const port = await start({ idleTimeoutMs: 0, handshakeTimeoutMs: 10_000 });
    const c = await rawSocket(port);
    c.socket.write(GET_LIVE);
    await waitFor(() => responses(c.received()) === 1, 'the response');
    // Bounded observation: with the old 65 s keep-alive this could not fail, so compare to a
    // server with a short idle timeout running side by side over the same span.
    const shortPort = await start({ idleTimeoutMs: 200, handshakeTimeoutMs: 10_000 });
    const short = await rawSocket(shortPort);
    short.socket.write(GET_LIVE);
    await waitFor(() => short.closedAt() !== undefined, 'the short-timeout connection to close', 5000);
    expect(c.closedAt()).toBeUndefined();
  });

  it('closes a slow-drip request (one header byte every 200 ms) after the handshake timeout', async () => {
    const port = await start({ idleTimeoutMs: 60_000, handshakeTimeoutMs: 600 });
    const c = await rawSocket(port);
    const request = 'GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: ' + 'a'.repeat(200) + '\r\n\r\n';
    const t0 = Date.now();
    let sent = 0;
    const drip = setInterval(() => {
      if (c.closedAt() !== undefined || sent >= request.length) return clearInterval(drip);
      c.socket.write(request[sent++]!);
    }, 200);
    try {
      await waitFor(() => c.closedAt() !== undefined, 'the slow-drip connection to be closed', 8000);
    } finally {
      clearInterval(drip);
    }
    expect(sent).toBeLessThan(request.length);
    expect(c.closedAt()! - t0).toBeGreaterThanOrEqual(500);
    expect(c.received()).not.toContain('HTTP/1.1 200');
  });

  it('keeps serving a normal keep-alive client on one connection', async () => {
    const port = await start({ idleTimeoutMs: 2000, handshakeTimeoutMs: 400 });
    const c = await rawSocket(port);
    for (let i = 1; i <= 3; i++) {
      c.socket.write(GET_LIVE);
      await waitFor(() => responses(c.received()) === i, `response ${i}`);
      // Pause longer than the handshake timeout between requests: an idle keep-alive
      // connection is bounded by the idle timeout, not by the handshake timeout.
      const until = Date.now() + 600;
      await waitFor(() => Date.now() >= until, 'a pause between requests', 5000, 50);
    }
    expect(c.closedAt()).toBeUndefined();
  });
});
