/**
 * One engine connection (UpstreamSession) against in-process peers on real sockets: when it
 * takes new calls (after SETTINGS, not after GOAWAY, not with outdated TLS files), how it counts
 * its open streams, and that it replaces itself after GOAWAY or a TLS rotation without waiting for
 * a call. Liveness by PING and reconnects are tested through the pool in upstream.test.ts.
 */
import {
  createSecureServer,
  createServer as createH2Server,
  type Http2SecureServer,
  type Http2Server,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClientTls } from '../../../../src/platform/tls/client-tls.js';
import { HEALTH_CHECK_PATH } from '../../../../src/sidecar/proxy/upstream-liveness.js';
import { UpstreamSession, type Reachability, type SessionSettings } from '../../../../src/sidecar/proxy/upstream-session.js';
import { fixturePki } from '../../../support/fixture-pki.js';
import { startRawH2Peer } from '../../../support/raw-h2-peer.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';
import { streamOutcome } from '../../../support/stream-outcome.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * An engine (h2c, or TLS with `tls`) that holds every request until the test answers it, except
 * the connection's health checks, answered at once as a gRPC server without that service does.
 */
async function startHoldingEngine<S extends Http2Server | Http2SecureServer>(
  server: S,
): Promise<{
  port: number;
  sessions: ServerHttp2Session[];
  held: ServerHttp2Stream[];
  readonly healthChecks: number;
  answer(stream: ServerHttp2Stream): void;
}> {
  const sessions: ServerHttp2Session[] = [];
  const held: ServerHttp2Stream[] = [];
  let healthChecks = 0;
  server.on('session', (session: ServerHttp2Session) => {
    sessions.push(session);
    session.on('error', () => {});
  });
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    stream.on('error', () => {});
    if (headers[':path'] !== HEALTH_CHECK_PATH) return void held.push(stream);
    healthChecks++;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' }, { endStream: true });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return {
    port: (server.address() as { port: number }).port,
    sessions,
    held,
    get healthChecks() {
      return healthChecks;
    },
    answer(stream) {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    },
  };
}

function upstreamSession(
  port: number,
  overrides: Partial<SessionSettings> = {},
): { session: UpstreamSession; log: RecordingLogger; changes: [Reachability, Record<string, unknown> | undefined][] } {
  const log = recordingLogger();
  const changes: [Reachability, Record<string, unknown> | undefined][] = [];
  const settings: SessionSettings = {
    target: { host: '127.0.0.1', port },
    authority: `${overrides.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    address: `127.0.0.1:${port}`,
    pingIntervalMs: 1000,
    pingTimeoutMs: 3000,
    silentSessionMs: 20_000,
    reconnectMinMs: 20,
    reconnectMaxMs: 50,
    tls: undefined,
    now: () => performance.now(),
    onReconnect: () => {},
    keepaliveIntervalMs: 300_000,
    keepaliveWithoutCalls: false,
    ...overrides,
  };
  const session = new UpstreamSession(0, settings, log, (s, fields) => changes.push([s.state, fields]));
  cleanups.push(() => session.close());
  return { session, log, changes };
}

const GET = { ':method': 'GET', ':path': '/' };

describe('UpstreamSession', () => {
  it('takes calls only once the engine sends its SETTINGS, and tells its listener the first outcome', async () => {
    const peer = await startRawH2Peer({ settingsOnConnect: false });
    cleanups.push(() => peer.close());
    const { session, changes } = upstreamSession(peer.port);
    session.start();
    await waitFor(() => peer.handshakesSeen === 1, 'the client handshake at the peer');
    expect(session.state).toBe('unknown');
    expect(session.connecting).toBe(true);
    expect(session.takesCalls()).toBe(false);
    peer.sendSettings();
    await waitFor(() => session.takesCalls(), 'taking calls after SETTINGS');
    expect(session.state).toBe('reachable');
    expect(session.connecting).toBe(false);
    expect(session.open).toBe(true);
    expect(changes).toEqual([['reachable', undefined]]);
  });

  it('counts the calls open on its connection until each one closes, and not its health checks', async () => {
    const engine = await startHoldingEngine(createH2Server());
    const { session } = upstreamSession(engine.port);
    const streams = [session.request(GET), session.request(GET), session.request(GET)];
    const outcomes = streams.map(streamOutcome);
    expect(session.openStreams).toBe(3);
    await waitFor(() => engine.held.length === 3, 'three requests at the engine');
    engine.answer(engine.held[0]!);
    expect(await outcomes[0]).toBe('200 ok');
    await waitFor(() => session.openStreams === 2, 'the answered stream uncounted');
    for (const stream of engine.held.slice(1)) engine.answer(stream);
    await Promise.all(outcomes);
    await waitFor(() => session.openStreams === 0, 'every stream uncounted');

    const checked = engine.healthChecks;
    await waitFor(() => engine.healthChecks > checked + 1, 'health checks of the idle connection');
    expect(session.openStreams).toBe(0);
  });

  it('takes no call once GOAWAY comes, lets its open call finish there, and opens its replacement without waiting for a call', async () => {
    const engine = await startHoldingEngine(createH2Server());
    const { session, log } = upstreamSession(engine.port);
    session.start();
    await waitFor(() => session.takesCalls(), 'taking calls');
    const held = session.request(GET);
    const done = streamOutcome(held);
    await waitFor(() => engine.held.length === 1, 'the request at the engine');
    engine.sessions[0]!.goaway(0, engine.held[0]!.id);
    await waitFor(() => held.session?.closed === true, 'the client to read the GOAWAY');
    expect(session.takesCalls()).toBe(false);

    engine.answer(engine.held[0]!);
    expect(await done).toBe('200 ok');
    await waitFor(() => engine.sessions.length === 2, 'a replacement connection, no call asking');
    await waitFor(() => session.takesCalls(), 'the replacement taking calls');
    expect(session.openStreams).toBe(0);
    expect(session.state).toBe('reachable');
    expect(log.lines.filter((line) => line.level === 'warn')).toEqual([]);
  });

  it('renews its connection when the TLS files change: the open call finishes on the old one, and the new one opens at once', async () => {
    const pki = fixturePki();
    cleanups.push(() => pki.remove());
    const engine = await startHoldingEngine(createSecureServer({ cert: pki.server.cert, key: pki.server.key, allowHTTP1: false }));
    // The parts of ClientTls a connection reads: the files' generation and the options built from them.
    const tls = { generation: 0, connectOptions: () => ({ ca: pki.ca.cert, servername: 'localhost' }), handshakeFailed: () => {} };
    const { session, log } = upstreamSession(engine.port, { tls: tls as unknown as ClientTls });
    session.start();
    await waitFor(() => session.takesCalls(), 'taking calls over TLS');
    const held = session.request(GET);
    const done = streamOutcome(held);
    await waitFor(() => engine.held.length === 1, 'the request at the engine');

    tls.generation = 1;
    expect(session.takesCalls()).toBe(false);
    expect(log.find('engine connection renewed: the TLS files changed; calls in progress finish on the old one')).toHaveLength(1);
    await waitFor(() => engine.sessions.length === 2, 'the new connection, no call asking');
    await waitFor(() => session.takesCalls(), 'the new connection taking calls');
    engine.answer(engine.held[0]!);
    expect(await done).toBe('200 ok');
  });
});
