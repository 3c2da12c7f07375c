/**
 * UpstreamPool against in-process peers on real sockets: readiness means the engine's HTTP/2
 * SETTINGS and PING answers (not a TCP connection), the first outcome and every change are logged
 * once, a bad request never costs the shared session, and GOAWAY moves new calls to a fresh one.
 */
import { createServer as createH2Server, type ClientHttp2Session, type ClientHttp2Stream, type Http2Server, type ServerHttp2Session } from 'node:http2';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamPool, type UpstreamOptions } from '../../../../src/sidecar/proxy/upstream.js';
import { startRawH2Peer } from '../../../support/raw-h2-peer.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A pool of one connection (upstream.pool.test.ts has the pools of several). */
function pool(port: number, options: Omit<UpstreamOptions, 'target'> = {}): { pool: UpstreamPool; log: RecordingLogger } {
  const log = recordingLogger();
  const upstream = new UpstreamPool({ target: { host: '127.0.0.1', port }, connections: 1, ...options }, log);
  cleanups.push(() => upstream.close());
  return { pool: upstream, log };
}

async function listen<T extends Server | Http2Server>(server: T, port = 0): Promise<T> {
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return server;
}

function portOf(server: Server | Http2Server): number {
  return (server.address() as { port: number }).port;
}

/** A plain HTTP/2 engine that answers every request with 200 "ok" and counts TCP connections. */
async function startH2Engine(): Promise<{ server: Http2Server; sessions: ServerHttp2Session[]; connections: () => number }> {
  const server = createH2Server();
  const sessions: ServerHttp2Session[] = [];
  let connections = 0;
  server.on('connection', () => connections++);
  server.on('session', (session) => {
    sessions.push(session);
    cleanups.push(() => void session.destroy());
  });
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    stream.end('ok');
  });
  await listen(server);
  return { server, sessions, connections: () => connections };
}

const GET = { ':method': 'GET', ':path': '/' };

/** Ends the request side and resolves with the response status and body. */
function readResponse(stream: ClientHttp2Stream): Promise<{ status: number; body: string }> {
  stream.end();
  return new Promise((resolve, reject) => {
    let body = '';
    let status = 0;
    stream.setEncoding('utf8');
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
  });
}

function fetchVia(upstream: UpstreamPool): Promise<{ status: number; body: string }> {
  return readResponse(upstream.request(GET));
}

describe('UpstreamPool readiness', () => {
  it('is reachable only once the engine sends its HTTP/2 SETTINGS, not when TCP connects', async () => {
    const peer = await startRawH2Peer({ settingsOnConnect: false });
    cleanups.push(() => peer.close());
    const { pool: upstream, log } = pool(peer.port, { pingTimeoutMs: 30_000 });
    upstream.start();
    // The client's preface and SETTINGS are on the peer's side, so the client's TCP 'connect' is long past.
    await waitFor(() => peer.handshakesSeen === 1, 'the client handshake to reach the peer');
    expect(upstream.reachable).toBe(false);
    peer.sendSettings();
    await waitFor(() => upstream.reachable, 'reachable after SETTINGS');
    expect(log.find('upstream reachable', 'info')).toHaveLength(1);
    expect(log.find('upstream reachable')[0]!.fields.upstream).toBe(peer.address);
    expect(log.find('upstream unreachable')).toHaveLength(0);
  });

  it('never reads a TCP-only engine as reachable, says why, logs it once, and reopens its silent session', async () => {
    let connections = 0;
    const mute: Socket[] = [];
    const server = await listen(
      createNetServer((socket) => {
        connections++;
        mute.push(socket);
      }),
    );
    cleanups.push(() => mute.forEach((socket) => socket.destroy()));
    const { pool: upstream, log } = pool(portOf(server), { pingTimeoutMs: 500, silentSessionMs: 1_500, reconnectMinMs: 20, reconnectMaxMs: 50 });
    const stream = upstream.request(GET);
    stream.on('error', () => {});
    await waitFor(() => log.find('upstream unreachable').length > 0, 'the unreachable log line');
    expect(upstream.unreachableReason).toBe(`upstream 127.0.0.1:${portOf(server)} unreachable: no HTTP/2 SETTINGS from the engine within 500 ms`);
    expect(upstream.wasConnected(stream.session as ClientHttp2Session)).toBe(false);
    // The silent session is destroyed and reopened, and the new one fails the same way.
    await waitFor(() => connections >= 2, 'a reconnection after the silent session was dropped');
    expect(stream.destroyed).toBe(true);
    expect(upstream.reachable).toBe(false);
    expect(log.find('upstream unreachable', 'warn')).toHaveLength(1);
    expect(log.find('upstream unreachable')[0]!.fields).toMatchObject({
      upstream: `127.0.0.1:${portOf(server)}`,
      reason: expect.stringContaining('no HTTP/2 SETTINGS'),
    });
    expect(log.find('upstream reachable')).toHaveLength(0);
    // node waits for a peer's FIN after a graceful close; a mute engine never sends one.
    await upstream.close();
  });

  it('marks an engine that stops answering PINGs unreachable without cutting its calls, and reachable again on a late answer', async () => {
    const peer = await startRawH2Peer();
    cleanups.push(() => peer.close());
    // A PING is allowed at every probe while a call is open: this peer answers nothing else.
    const { pool: upstream, log } = pool(peer.port, { pingIntervalMs: 100, pingTimeoutMs: 1_000, keepaliveIntervalMs: 100 });
    const changes: boolean[] = [];
    upstream.onReachabilityChange((reachable) => changes.push(reachable));
    upstream.start();
    await waitFor(() => upstream.reachable, 'reachable');
    const call = upstream.request(GET);
    call.on('error', () => {});

    peer.setAnswerPings(false);
    const stoppedAt = performance.now();
    await waitFor(() => !upstream.reachable, 'unreachable once PINGs go unanswered');
    expect(performance.now() - stoppedAt).toBeGreaterThanOrEqual(1_000 - 50);
    expect(upstream.unreachableReason).toContain('engine did not answer PING within 1000 ms');
    expect(peer.pingsPending).toBe(1);

    peer.setAnswerPings(true);
    await waitFor(() => upstream.reachable, 'reachable again after the late answer');
    expect(call.destroyed).toBe(false);
    expect(peer.connections).toBe(1);
    expect(changes).toEqual([true, false, true]);
    expect(log.lines.filter((line) => line.msg.startsWith('upstream ')).map((line) => line.msg)).toEqual([
      'upstream reachable',
      'upstream unreachable',
      'upstream reachable',
    ]);
    expect(log.find('upstream reachable')[1]!.fields.lateAnswerMs).toBeGreaterThanOrEqual(1_000 - 50);
  });

  it('destroys and reopens a session that stays silent for silentSessionMs', async () => {
    const peer = await startRawH2Peer();
    cleanups.push(() => peer.close());
    const { pool: upstream } = pool(peer.port, { pingIntervalMs: 100, pingTimeoutMs: 500, silentSessionMs: 1_500, keepaliveIntervalMs: 100 });
    upstream.start();
    await waitFor(() => upstream.reachable, 'reachable');
    const call = upstream.request(GET);
    call.on('error', () => {});
    const session = call.session as ClientHttp2Session;
    peer.setAnswerPings(false);
    await waitFor(() => call.destroyed, 'the call on the silent session to end');
    await waitFor(() => peer.connections === 2, 'a fresh session');
    expect(session.destroyed).toBe(true);
    // It did speak HTTP/2 before falling silent: its calls count as lost, not as never connected.
    expect(upstream.wasConnected(session)).toBe(true);
    peer.setAnswerPings(true);
    await waitFor(() => upstream.reachable, 'reachable on the fresh session');
  });

  it('logs an engine unreachable from the start once, not once per reconnect attempt', async () => {
    // Nothing listens on the port at first (connection refused), later something that resets every connection.
    const probe = await listen(createNetServer());
    const port = portOf(probe);
    await new Promise((resolve) => probe.close(resolve));
    const { pool: upstream, log } = pool(port, { reconnectMinMs: 20, reconnectMaxMs: 50 });
    upstream.start();
    await waitFor(() => log.find('upstream unreachable').length > 0, 'the unreachable log line');
    expect(log.find('upstream unreachable')[0]!.fields).toMatchObject({ upstream: `127.0.0.1:${port}`, reason: `ECONNREFUSED 127.0.0.1:${port}` });
    expect(upstream.unreachableReason).toBe(`upstream 127.0.0.1:${port} unreachable: ECONNREFUSED 127.0.0.1:${port}`);

    let resets = 0;
    await listen(
      createNetServer((socket) => {
        resets++;
        socket.resetAndDestroy();
      }),
      port,
    );
    await waitFor(() => resets >= 5, 'five more reconnect attempts');
    expect(log.find('upstream unreachable')).toHaveLength(1);
    expect(log.lines.filter((line) => line.level !== 'debug')).toHaveLength(1);
  });
});

describe('UpstreamPool sessions', () => {
  it('rejects a request with connection-specific headers without opening a new connection', async () => {
    const engine = await startH2Engine();
    const { pool: upstream } = pool(portOf(engine.server));
    expect(await fetchVia(upstream)).toEqual({ status: 200, body: 'ok' });
    const bad = [{ connection: 'x' }, { te: 'Trailers' }, { 'http2-settings': 'AAMAAABkAAQAoAAAAAIAAAAA' }, { 'keep-alive': 'timeout=5' }, { upgrade: 'h2c' }];
    for (let i = 0; i < 50; i++) {
      expect(() => upstream.request({ ...GET, ...bad[i % bad.length] })).toThrow(expect.objectContaining({ code: 'ERR_HTTP2_INVALID_CONNECTION_HEADERS' }));
    }
    expect(await fetchVia(upstream)).toEqual({ status: 200, body: 'ok' });
    expect(engine.connections()).toBe(1);
    expect(upstream.reachable).toBe(true);
  });

  it('sends a request made as GOAWAY arrives on a fresh session, and it succeeds', async () => {
    const engine = await startH2Engine();
    const { pool: upstream } = pool(portOf(engine.server));
    const first = upstream.request(GET);
    const firstSession = first.session!;
    expect(await readResponse(first)).toEqual({ status: 200, body: 'ok' });
    // The pool's own 'goaway' listener runs first; node closes the session only after the event,
    // so without that listener this request would go on the dying session.
    const next = new Promise<ClientHttp2Stream>((resolve) => firstSession.once('goaway', () => resolve(upstream.request(GET))));
    engine.sessions[0]!.goaway();
    const stream = await next;
    expect(stream.session).not.toBe(firstSession);
    expect(await readResponse(stream)).toEqual({ status: 200, body: 'ok' });
    expect(engine.connections()).toBe(2);
    expect(await fetchVia(upstream)).toEqual({ status: 200, body: 'ok' });
    expect(engine.connections()).toBe(2);
  });
});
