/**
 * UpstreamPool with several connections (--upstream-connections K > 1), against a real
 * node:http2 engine on 127.0.0.1, reached through an in-process relay that tells which connection
 * each call took and can hold or cut one connection: new calls go to the connection with the
 * fewest open streams among those that take calls; a connection that got GOAWAY, was cut or stopped
 * answering its probes gets no new call while another can take it; the pool is down only when every
 * connection is, and says how many.
 */
import { createServer as createH2Server, type ClientHttp2Stream, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { HEALTH_CHECK_PATH } from '../../../../src/sidecar/proxy/upstream-liveness.js';
import { UpstreamPool, type UpstreamOptions } from '../../../../src/sidecar/proxy/upstream.js';
import { startH2Relay, type H2Relay, type RelayConnection } from '../../../support/h2-relay.js';
import { startRawH2Peer } from '../../../support/raw-h2-peer.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';
import { streamOutcome } from '../../../support/stream-outcome.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const TAG = 'x-call';

/**
 * An engine that holds every request until the test answers it (200 "ok"), except the
 * connections' health checks, answered at once as a gRPC server without that service does.
 */
interface HoldingEngine {
  readonly server: Http2Server;
  readonly port: number;
  readonly sessions: ServerHttp2Session[];
  /** Requests not answered yet, by tag. */
  readonly held: Map<string, ServerHttp2Stream>;
  /** Answers the request `tag` once it has arrived. */
  answer(tag: string): Promise<void>;
}

async function startHoldingEngine(): Promise<HoldingEngine> {
  const server = createH2Server();
  const sessions: ServerHttp2Session[] = [];
  const held = new Map<string, ServerHttp2Stream>();
  server.on('session', (session) => {
    sessions.push(session);
    session.on('error', () => {});
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    if (headers[':path'] === HEALTH_CHECK_PATH)
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' }, { endStream: true });
    else held.set(String(headers[TAG]), stream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return {
    server,
    port: (server.address() as { port: number }).port,
    sessions,
    held,
    async answer(tag) {
      await waitFor(() => held.has(tag), `request ${tag} at the engine`);
      const stream = held.get(tag)!;
      held.delete(tag);
      stream.respond({ ':status': 200 });
      stream.end('ok');
    },
  };
}

async function relayTo(port: number): Promise<H2Relay> {
  const relay = await startH2Relay(port, { tagHeader: TAG });
  cleanups.push(() => relay.close());
  return relay;
}

function pool(port: number, connections: number, options: Omit<UpstreamOptions, 'target' | 'connections'> = {}): { pool: UpstreamPool; log: RecordingLogger } {
  const log = recordingLogger();
  const upstream = new UpstreamPool({ target: { host: '127.0.0.1', port }, connections, ...options }, log);
  cleanups.push(() => upstream.close());
  return { pool: upstream, log };
}

/** A request named `tag`, its request side ended; its outcome: the status and body, or the error's code. */
function call(upstream: UpstreamPool, tag: string): { stream: ClientHttp2Stream; outcome: Promise<string> } {
  const stream = upstream.request({ ':method': 'POST', ':path': '/', [TAG]: tag });
  return { stream, outcome: streamOutcome(stream) };
}

/** The relay connection a tagged call went on (its index), once the relay has seen it. */
function connectionOf(relay: H2Relay, tag: string): number | undefined {
  return relay.connections.find((c) => [...c.streams.values()].some((s) => s.tag === tag))?.index;
}

async function connectionsOf(relay: H2Relay, tags: string[]): Promise<number[]> {
  await waitFor(() => tags.every((tag) => connectionOf(relay, tag) !== undefined), `the relay to see calls ${tags.join(', ')}`);
  return tags.map((tag) => connectionOf(relay, tag)!);
}

/** Starts the pool and waits until every one of its K connections reads reachable. */
async function allReachable(upstream: UpstreamPool, log: RecordingLogger, k: number): Promise<void> {
  upstream.start();
  await waitFor(() => new Set(log.find('upstream connection reachable').map((line) => line.fields.connection)).size === k, `all ${k} connections reachable`);
}

const tags = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('UpstreamPool of several connections', () => {
  it('opens K connections at start, logs each one reachable with its index, and the pool reachable once', async () => {
    const engine = await startHoldingEngine();
    const { pool: upstream, log } = pool(engine.port, 3);
    const changes: boolean[] = [];
    upstream.onReachabilityChange((reachable) => changes.push(reachable));
    await allReachable(upstream, log, 3);
    expect(engine.sessions).toHaveLength(3);
    expect(log.find('upstream connection reachable').map((line) => line.fields.connection)).toEqual(expect.arrayContaining([0, 1, 2]));
    expect(log.find('upstream reachable')).toHaveLength(1);
    expect(log.find('upstream reachable')[0]!.fields).toEqual({ upstream: `127.0.0.1:${engine.port}` });
    expect(changes).toEqual([true]);
    expect(upstream.down).toBe(false);
  });

  it('sends each new call to the connection with the fewest open streams, ties in turn', async () => {
    const engine = await startHoldingEngine();
    const relay = await relayTo(engine.port);
    const { pool: upstream, log } = pool(relay.port, 3);
    await allReachable(upstream, log, 3);

    const first = tags('a', 6).map((tag) => call(upstream, tag));
    const placed = await connectionsOf(relay, tags('a', 6));
    // Ties go in turn: three calls on three connections, then round again.
    expect(new Set(placed.slice(0, 3)).size).toBe(3);
    expect(placed.slice(3)).toEqual(placed.slice(0, 3));

    // Two calls of one connection end: it has the fewest open streams, and the next two go there.
    const freed = placed[1]!;
    await engine.answer('a1');
    await engine.answer('a4');
    expect(await first[1]!.outcome).toBe('200 ok');
    expect(await first[4]!.outcome).toBe('200 ok');
    await waitFor(() => first[1]!.stream.closed && first[4]!.stream.closed, 'both streams closed');
    const next = tags('b', 2).map((tag) => call(upstream, tag));
    expect(await connectionsOf(relay, tags('b', 2))).toEqual([freed, freed]);
    for (const tag of [...tags('a', 6).filter((t) => t !== 'a1' && t !== 'a4'), ...tags('b', 2)]) await engine.answer(tag);
    expect(await Promise.all([...first, ...next].map((c) => c.outcome))).toEqual(new Array(8).fill('200 ok'));
  });

  it('gives no new call to a connection that got GOAWAY while another takes calls; its calls finish there, and it is replaced', async () => {
    const engine = await startHoldingEngine();
    const relay = await relayTo(engine.port);
    const { pool: upstream, log } = pool(relay.port, 2);
    await allReachable(upstream, log, 2);
    const held = tags('held', 2).map((tag) => call(upstream, tag));
    const [goneAway, other] = await connectionsOf(relay, tags('held', 2));
    expect(goneAway).not.toBe(other);

    relay.connections[goneAway!]!.goaway();
    await waitFor(() => held[0]!.stream.session?.closed === true, 'the client to read the GOAWAY');
    const after = tags('after', 4).map((tag) => call(upstream, tag));
    expect(await connectionsOf(relay, tags('after', 4))).toEqual([other, other, other, other]);
    expect(upstream.reachable).toBe(true);

    // The call in flight on it finishes there; then the client closes it, and a fresh connection takes its place.
    await engine.answer('held0');
    expect(await held[0]!.outcome).toBe('200 ok');
    await waitFor(() => relay.connections.length === 3 && relay.connections[2]!.clientSettingsAcked, 'a replacement connection in use');
    await waitFor(() => !relay.connections[goneAway!]!.open, 'the client to close the connection that got GOAWAY');
    // The replacement has the fewest open streams: new calls go there.
    const fresh = call(upstream, 'fresh');
    expect(await connectionsOf(relay, ['fresh'])).toEqual([2]);
    for (const tag of ['held1', ...tags('after', 4), 'fresh']) await engine.answer(tag);
    expect(await Promise.all([held[1]!, ...after, fresh].map((c) => c.outcome))).toEqual(new Array(6).fill('200 ok'));
    expect(log.find('upstream unreachable')).toHaveLength(0);
  });

  it('gives no new call to a connection that was cut while another takes calls; its calls fail, and it is reopened', async () => {
    const engine = await startHoldingEngine();
    const relay = await relayTo(engine.port);
    const { pool: upstream, log } = pool(relay.port, 2, { reconnectMinMs: 20, reconnectMaxMs: 50 });
    const changes: boolean[] = [];
    upstream.onReachabilityChange((reachable) => changes.push(reachable));
    await allReachable(upstream, log, 2);
    const held = tags('held', 2).map((tag) => call(upstream, tag));
    const [cut, other] = await connectionsOf(relay, tags('held', 2));
    const cutSession = held[0]!.stream.session!;

    relay.connections[cut!]!.kill();
    expect(await held[0]!.outcome).not.toBe('200 ok');
    // The call was lost with a connection that had been up, not refused by one never made.
    expect(upstream.wasConnected(cutSession as never)).toBe(true);
    const after = tags('after', 4).map((tag) => call(upstream, tag));
    const placed = await connectionsOf(relay, tags('after', 4));
    // The surviving connection or, once it is up, the reopened one (index 2): never the cut one.
    expect(placed).not.toContain(cut);
    expect(placed.every((index) => index === other || index === 2)).toBe(true);
    await waitFor(() => relay.connections.length === 3 && relay.connections[2]!.clientSettingsAcked, 'the cut connection reopened');
    for (const tag of ['held1', ...tags('after', 4)]) await engine.answer(tag);
    expect(await Promise.all([held[1]!, ...after].map((c) => c.outcome))).toEqual(new Array(5).fill('200 ok'));
    expect(changes).toEqual([true]);
    expect(log.find('upstream unreachable')).toHaveLength(0);
  });

  it('gives no new call to a connection whose health checks go unanswered while another takes calls, and takes it back once it answers', async () => {
    const engine = await startHoldingEngine();
    const relay = await relayTo(engine.port);
    const { pool: upstream, log } = pool(relay.port, 2, { pingIntervalMs: 50, pingTimeoutMs: 300 });
    await allReachable(upstream, log, 2);
    await waitFor(() => relay.connections.length === 2, 'two relayed connections');
    const [silent, other] = [relay.connections[0]!, relay.connections[1]!];

    silent.hold();
    await waitFor(() => log.find('upstream connection unreachable').length === 1, 'one connection unreachable');
    expect(log.find('upstream connection unreachable')[0]!.fields.reason).toBe(`engine did not answer ${HEALTH_CHECK_PATH} within 300 ms`);
    expect(upstream.reachable).toBe(true);
    expect(upstream.down).toBe(false);
    const during = tags('during', 4).map((tag) => call(upstream, tag));
    expect(await connectionsOf(relay, tags('during', 4))).toEqual([other.index, other.index, other.index, other.index]);

    silent.release();
    await waitFor(() => log.find('upstream connection reachable').length === 3, 'the silent connection reachable again');
    expect(log.find('upstream connection reachable')[2]!.fields.lateAnswerMs).toBeGreaterThanOrEqual(300 - 50);
    // It has no open stream, the other has four: the next calls go to it.
    const back = tags('back', 2).map((tag) => call(upstream, tag));
    expect(await connectionsOf(relay, tags('back', 2))).toEqual([silent.index, silent.index]);
    for (const tag of [...tags('during', 4), ...tags('back', 2)]) await engine.answer(tag);
    expect(await Promise.all([...during, ...back].map((c) => c.outcome))).toEqual(new Array(6).fill('200 ok'));
    expect(log.find('upstream unreachable')).toHaveLength(0);
  });

  it('is down only when every connection is unreachable, says how many and the first reason, and tells listeners once per change', async () => {
    const engine = await startHoldingEngine();
    const relay = await relayTo(engine.port);
    const { pool: upstream, log } = pool(relay.port, 3, { pingIntervalMs: 50, pingTimeoutMs: 300 });
    const changes: boolean[] = [];
    upstream.onReachabilityChange((reachable) => changes.push(reachable));
    await allReachable(upstream, log, 3);
    await waitFor(() => relay.connections.length === 3, 'three relayed connections');
    const unreachable = (): number => log.find('upstream connection unreachable').length;

    relay.connections[0]!.hold();
    await waitFor(() => unreachable() === 1, 'one connection unreachable');
    relay.connections[1]!.hold();
    await waitFor(() => unreachable() === 2, 'two connections unreachable');
    expect(upstream.reachable).toBe(true);
    expect(upstream.down).toBe(false);
    expect(changes).toEqual([true]);

    relay.connections[2]!.hold();
    await waitFor(() => upstream.down, 'the pool down');
    expect(upstream.reachable).toBe(false);
    expect(upstream.unreachableReason).toBe(
      `upstream 127.0.0.1:${relay.port} unreachable: 3 of 3 connections down; first: engine did not answer ${HEALTH_CHECK_PATH} within 300 ms`,
    );
    expect(changes).toEqual([true, false]);
    expect(log.find('upstream unreachable', 'warn')).toHaveLength(1);
    expect(log.find('upstream unreachable')[0]!.fields).toEqual({
      upstream: `127.0.0.1:${relay.port}`,
      reason: expect.stringContaining('3 of 3 connections down'),
    });

    relay.connections[2]!.release();
    await waitFor(() => upstream.reachable, 'reachable again once one connection answers');
    expect(upstream.down).toBe(false);
    expect(changes).toEqual([true, false, true]);
    expect(log.find('upstream reachable')).toHaveLength(2);
    expect(log.find('upstream unreachable')).toHaveLength(1);
  });

  it('names the count and the reason when no connection can be made at all, and logs that once', async () => {
    const engine = await startHoldingEngine();
    const port = engine.port;
    await new Promise((resolve) => engine.server.close(resolve));
    const { pool: upstream, log } = pool(port, 2, { reconnectMinMs: 20, reconnectMaxMs: 50 });
    upstream.start();
    await waitFor(() => upstream.down, 'the pool down');
    expect(upstream.unreachableReason).toBe(`upstream 127.0.0.1:${port} unreachable: 2 of 2 connections down; first: ECONNREFUSED 127.0.0.1:${port}`);
    expect(log.find('upstream unreachable', 'warn')).toHaveLength(1);
    expect(log.find('upstream connection unreachable', 'warn')).toHaveLength(2);
  });

  it('sends a call made before any connection has SETTINGS to one being opened, and opens no more', async () => {
    const peer = await startRawH2Peer({ settingsOnConnect: false });
    cleanups.push(() => peer.close());
    const { pool: upstream } = pool(peer.port, 2, { pingTimeoutMs: 30_000 });
    upstream.start();
    await waitFor(() => peer.handshakesSeen === 2, 'both client handshakes at the peer');
    const stream = upstream.request({ ':method': 'GET', ':path': '/' });
    stream.on('error', () => {});
    expect(stream.destroyed).toBe(false);
    expect(upstream.reachable).toBe(false);
    expect(upstream.down).toBe(false);
    peer.sendSettings();
    await waitFor(() => upstream.reachable, 'reachable after SETTINGS');
    expect(peer.connections).toBe(2);
  });

  it('refuses a pool of no connection', () => {
    expect(() => new UpstreamPool({ target: { host: '127.0.0.1', port: 1 }, connections: 0 }, recordingLogger())).toThrow(RangeError);
  });

  it('closes every connection on close(), and takes no call after', async () => {
    const engine = await startHoldingEngine();
    const relay = await relayTo(engine.port);
    const { pool: upstream, log } = pool(relay.port, 3);
    await allReachable(upstream, log, 3);
    await upstream.close();
    await waitFor(() => relay.connections.every((c: RelayConnection) => !c.open), 'every connection closed');
    expect(relay.connections).toHaveLength(3);
    expect(() => upstream.request({ ':method': 'GET', ':path': '/' })).toThrow('upstream pool closed');
  });
});
