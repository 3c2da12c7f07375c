/**
 * The sidecar in front of an engine that misbehaves (issue 8): hung (SIGSTOP), sending GOAWAY
 * mid-traffic, killed under load, accepting TCP but never speaking HTTP/2, resetting streams,
 * answering and then hanging. Plus the sidecar's own signals: SIGHUP, and calls cut when the
 * SIGTERM drain grace ends. N=4, Q=2; every case ends with the process alive, both gauges at 0,
 * a normal call working, and the engine never holding more than N calls.
 */
import * as grpc from '@grpc/grpc-js';
import { constants, createServer as createH2Server, type Http2Server, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { startEngineProcess, type EngineProcess } from '../../../support/engine-process.js';
import { testEngineClient, unary, type TestEngineClient, type UnaryOutcome } from '../../../support/grpc-client.js';
import { H2Wire, dataFrame, grpcRequestHeaders } from '../../../support/h2-wire.js';
import { TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

const N = 4;
const ADMISSION_ENV = { DYN_ENGINE_REQUEST_LIMIT: String(N), DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '2' };
const RETRYABLE_OR_CLEAN = [grpc.status.OK, grpc.status.UNAVAILABLE];

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function sidecarFor(upstream: string, args: string[] = [], env: Record<string, string> = {}): Promise<SidecarProcess> {
  const sidecar = await startSidecarProcess(['--upstream', upstream, ...args], { ...ADMISSION_ENV, ...env });
  cleanups.push(() => sidecar.stop('SIGKILL'));
  return sidecar;
}

/** The in-process test engine behind a sidecar that reports ready; both stopped after the test. */
async function readySidecarOverTestEngine(args: string[] = []): Promise<{ engine: TestEngine; sidecar: SidecarProcess }> {
  const engine = await startTestEngine();
  cleanups.push(() => engine.close());
  const sidecar = await sidecarFor(engine.address, args);
  await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready', 10_000);
  return { engine, sidecar };
}

function clientFor(sidecar: SidecarProcess): TestEngineClient {
  const client = testEngineClient(sidecar.address);
  cleanups.push(() => client.close());
  return client;
}

function expectAlive(sidecar: SidecarProcess): void {
  const { exitCode, signalCode } = sidecar.proc;
  expect(
    exitCode === null && signalCode === null,
    `sidecar died: exit code ${exitCode}, signal ${signalCode}\n${sidecar.stderr().trim().split('\n').slice(-10).join('\n')}`,
  ).toBe(true);
}

async function expectGaugesZero(sidecar: SidecarProcess, timeoutMs = 10_000): Promise<void> {
  let last = '';
  try {
    await waitFor(
      async () => {
        const [engine, queue] = [await sidecar.metric('dynamo_engine_request'), await sidecar.metric('dynamo_request_queue')];
        last = `dynamo_engine_request=${engine} dynamo_request_queue=${queue}`;
        return engine === 0 && queue === 0;
      },
      'the admission gauges to return to 0',
      timeoutMs,
      50,
    );
  } catch {
    await Promise.race([sidecar.exited(), new Promise((resolve) => setTimeout(resolve, 1000))]);
    expectAlive(sidecar);
    expect.fail(`gauges did not return to 0 within ${timeoutMs} ms: ${last}`);
  }
}

/** Alive, gauges 0, a normal call works (waiting for readiness first), the engine never saw more than N. */
async function expectHealthy(sidecar: SidecarProcess, maxActive: () => number | Promise<number>, readyTimeoutMs = 15_000): Promise<void> {
  expectAlive(sidecar);
  await expectGaugesZero(sidecar);
  await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'the sidecar to be ready again', readyTimeoutMs, 100);
  const client = testEngineClient(sidecar.address);
  try {
    const outcome = await unary(client, 'Unary', { payload: Buffer.from('still serving') }, { deadlineMs: 10_000 });
    expect(outcome.code, `a normal call afterwards: ${outcome.details}`).toBe(grpc.status.OK);
  } finally {
    client.close();
  }
  expect(await maxActive(), 'calls inside the engine at once').toBeLessThanOrEqual(N);
  expectAlive(sidecar);
}

/**
 * A raw node:http2 engine for misbehaviours grpc-js will not produce: it answers every call with
 * one empty message and OK, unless the request carries `x-rst-code` (reset with that code, before
 * or after response headers per `x-rst-when`), or `x-goaway-code` (its connection dropped with
 * GOAWAY(code), the engine staying up). It counts the test service's calls open at once.
 */
interface RawEngine {
  readonly port: number;
  readonly address: string;
  readonly maxActive: number;
  readonly active: number;
  readonly sessions: Set<Http2Session>;
  close(): Promise<void>;
}
async function startRawEngine(): Promise<RawEngine> {
  const server: Http2Server = createH2Server();
  const sessions = new Set<Http2Session>();
  let active = 0;
  let maxActive = 0;
  server.on('session', (session) => {
    sessions.add(session);
    session.on('error', () => {});
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    stream.on('error', () => {});
    // Only the clients' calls count: the sidecar's own probes (GetLoads while it detects a KV
    // source, health) hold no admission slot and may run beside N calls.
    if (String(headers[':path']).startsWith(`${TEST_ENGINE_PATH}/`)) {
      active++;
      maxActive = Math.max(maxActive, active);
      stream.on('close', () => active--);
    }
    const goaway = headers['x-goaway-code'];
    // The whole connection goes, with GOAWAY(code); the engine itself stays up and accepts new ones.
    if (typeof goaway === 'string') return void setImmediate(() => stream.session?.destroy(new Error('engine dropped the connection'), Number(goaway)));
    const rst = headers['x-rst-code'];
    const when = headers['x-rst-when'];
    stream.resume();
    if (typeof rst === 'string' && when !== 'after-headers') return void setImmediate(() => stream.close(Number(rst)));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    if (typeof rst === 'string') {
      stream.write(frameMessage(Buffer.alloc(0)));
      return void setImmediate(() => stream.close(Number(rst)));
    }
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.on('end', () => stream.end(frameMessage(Buffer.alloc(0))));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    address: `127.0.0.1:${port}`,
    get maxActive() {
      return maxActive;
    },
    get active() {
      return active;
    },
    sessions,
    close: () =>
      new Promise<void>((resolve) => {
        for (const session of sessions) session.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('a hung engine', () => {
  it('turns /ready 503 within a few seconds of SIGSTOP and 200 again after SIGCONT', async () => {
    const engine = await startEngineProcess();
    cleanups.push(() => engine.kill());
    cleanups.push(() => engine.proc.kill('SIGCONT'));
    const sidecar = await sidecarFor(engine.address);
    const client = clientFor(sidecar);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready with a live engine', 10_000);
    // One call outstanding, so PINGs go unanswered while the engine is stopped.
    const held = unary(client, 'Hold', { tag: 'outstanding-at-sigstop' }, { deadlineMs: 60_000 });
    await waitFor(async () => (await engine.stats()).held === 1, 'the call in the engine');

    engine.proc.kill('SIGSTOP');
    const stoppedAt = Date.now();
    await waitFor(async () => (await sidecar.get('/ready')).status === 503, '/ready to turn 503 for a stopped engine', 12_000, 100);
    const detectedMs = Date.now() - stoppedAt;
    expect(detectedMs, 'ms from SIGSTOP to /ready 503').toBeLessThan(12_000);

    engine.proc.kill('SIGCONT');
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, '/ready to turn 200 after SIGCONT', 15_000, 100);
    engine.release();
    expect(RETRYABLE_OR_CLEAN).toContain((await held).code);
    await expectHealthy(sidecar, async () => (await engine.stats()).maxActive);
  });
});

describe('an engine that goes away', () => {
  it('keeps serving through an engine GOAWAY in the middle of traffic', async () => {
    const engine = await startRawEngine();
    cleanups.push(() => engine.close());
    const sidecar = await sidecarFor(engine.address);
    const client = clientFor(sidecar);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready', 10_000);
    const outcomes: UnaryOutcome<unknown>[] = [];
    let goawaySent = false;
    for (let round = 0; round < 20; round++) {
      const batch = Array.from({ length: N }, () => unary(client, 'Unary', { payload: Buffer.from('x') }, { deadlineMs: 10_000 }));
      if (round === 10) {
        // GOAWAY on the engine's session while this batch is in flight.
        for (const session of engine.sessions) session.close();
        goawaySent = engine.sessions.size > 0;
      }
      outcomes.push(...(await Promise.all(batch)));
    }
    expect(goawaySent).toBe(true);
    const bad = outcomes.filter((o) => !RETRYABLE_OR_CLEAN.includes(o.code));
    expect(
      bad.map((o) => `${o.code} ${o.details}`),
      'calls ending other than OK or UNAVAILABLE',
    ).toEqual([]);
    await expectHealthy(sidecar, () => engine.maxActive);
  });

  it('serves the next call after an engine GOAWAY(INTERNAL_ERROR) on a connection it replaces at once (a closed session is not a down engine)', async () => {
    const engine = await startRawEngine();
    cleanups.push(() => engine.close());
    const sidecar = await sidecarFor(engine.address);
    const client = clientFor(sidecar);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready', 10_000);
    const metadata = new grpc.Metadata();
    metadata.set('x-goaway-code', String(constants.NGHTTP2_INTERNAL_ERROR));
    for (let round = 0; round < 5; round++) {
      const dropped = await unary(client, 'Unary', {}, { metadata, deadlineMs: 10_000 });
      expect(dropped.code, 'the call on the dropped connection').toBe(grpc.status.UNAVAILABLE);
      const next = await unary(client, 'Unary', { payload: Buffer.from('x') }, { deadlineMs: 10_000 });
      expect(next.code, `round ${round}: the call after the GOAWAY: ${next.details}`).toBe(grpc.status.OK);
    }
    await expectHealthy(sidecar, () => engine.maxActive);
  });

  it('ends calls UNAVAILABLE when the engine is killed under load, frees every slot, and picks up the restarted engine', async () => {
    let engine: EngineProcess = await startEngineProcess();
    cleanups.push(() => engine.kill());
    const sidecar = await sidecarFor(engine.address);
    const client = clientFor(sidecar);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready', 10_000);
    const calls = Array.from({ length: N + 2 }, (_, i) => unary(client, 'Hold', { tag: `killed-${i}` }, { deadlineMs: 30_000 }));
    await waitFor(
      async () => (await sidecar.metric('dynamo_engine_request')) === N && (await sidecar.metric('dynamo_request_queue')) === 2,
      'engine and queue full',
    );
    const maxBefore = (await engine.stats()).maxActive;
    const port = engine.port;
    await engine.kill();
    const outcomes = await Promise.all(calls);
    for (const outcome of outcomes) {
      expect(outcome.code, outcome.details).toBe(grpc.status.UNAVAILABLE);
      expect(outcome.details, 'messages to clients do not name the engine').not.toContain(`:${port}`);
    }
    await expectGaugesZero(sidecar);
    engine = await startEngineProcess(port);
    await expectHealthy(sidecar, async () => Math.max(maxBefore, (await engine.stats()).maxActive));
  });

  it('never reports ready for an engine that accepts TCP but never speaks HTTP/2, and ends calls UNAVAILABLE within their deadline', async () => {
    const sockets = new Set<Socket>();
    const mute: NetServer = createNetServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => (sockets.forEach((s) => s.destroy()), mute.close(() => resolve()))));
    const sidecar = await sidecarFor(`127.0.0.1:${(mute.address() as { port: number }).port}`);
    const client = clientFor(sidecar);
    await waitFor(() => sockets.size > 0, 'the sidecar to connect to the mute engine');
    // Sample /ready for 4 s: it must never say ready.
    const statuses = new Set<number>();
    for (const end = Date.now() + 4000; Date.now() < end;) {
      statuses.add((await sidecar.get('/ready')).status);
      await new Promise((resolve) => setTimeout(resolve, 200)); // sampling period, not synchronisation
    }
    expect([...statuses], '/ready statuses seen').toEqual([503]);
    expect(await sidecar.metric('dynamo_sidecar_upstream_up')).toBe(0);

    const started = Date.now();
    const outcomes = await Promise.all(Array.from({ length: 3 }, () => unary(client, 'Unary', { payload: Buffer.from('x') }, { deadlineMs: 3000 })));
    for (const outcome of outcomes) {
      expect(outcome.code, outcome.details).toBe(grpc.status.UNAVAILABLE);
      expect(outcome.details, 'messages to clients do not name the engine').not.toContain(`:${(mute.address() as { port: number }).port}`);
    }
    expect(Date.now() - started, 'ms until the calls ended').toBeLessThan(3500);
    expectAlive(sidecar);
    await expectGaugesZero(sidecar);
  });
});

describe('an engine that resets or stalls streams', () => {
  it.each(['before-headers', 'after-headers'])('passes on engine resets with every error code (%s), freeing each slot', async (when) => {
    const engine = await startRawEngine();
    cleanups.push(() => engine.close());
    const sidecar = await sidecarFor(engine.address);
    const client = clientFor(sidecar);
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'ready', 10_000);
    for (let code = 0; code <= 13; code++) {
      const metadata = new grpc.Metadata();
      metadata.set('x-rst-code', String(code));
      metadata.set('x-rst-when', when);
      const outcome = await unary(client, 'Unary', { payload: Buffer.from('x') }, { metadata, deadlineMs: 10_000 });
      expect(outcome.code, `engine reset with code ${code}: ${outcome.details}`).not.toBe(grpc.status.OK);
      expect(outcome.code, `engine reset with code ${code} must not look like a deadline`).not.toBe(grpc.status.DEADLINE_EXCEEDED);
      expectAlive(sidecar);
    }
    await expectHealthy(sidecar, () => engine.maxActive);
  });

  it('ends a call whose engine answered and then hung with DEADLINE_EXCEEDED, and frees its slot', async () => {
    const { engine, sidecar } = await readySidecarOverTestEngine();
    const wire = await H2Wire.connect(sidecar.port);
    cleanups.push(() => wire.destroy());
    const ids = Array.from({ length: N }, () =>
      wire.sendHeaders(
        grpcRequestHeaders(`${TEST_ENGINE_PATH}/Early`, [
          ['grpc-timeout', '1S'],
          ['x-replies', '1'],
        ]),
      ),
    );
    for (const id of ids) wire.write(dataFrame(id, frameMessage(Buffer.alloc(0)), true));
    await wire.until(() => ids.every((id) => wire.isDone(id)), 10_000, 'every call to end');
    for (const id of ids) {
      expect(wire.stream(id).dataBytes, 'the reply sent before the engine hung').toBeGreaterThan(0);
      expect(wire.grpcStatus(id), `grpc-message: ${wire.grpcMessage(id)}`).toBe(grpc.status.DEADLINE_EXCEEDED);
    }
    await waitFor(() => engine.early === 0, 'the engine to see the hung calls cancelled');
    await expectHealthy(sidecar, () => engine.maxActive);
  });
});

describe("the sidecar's own signals", () => {
  it('keeps serving after SIGHUP, and logs it', async () => {
    const { engine, sidecar } = await readySidecarOverTestEngine();
    sidecar.proc.kill('SIGHUP');
    await waitFor(
      () => /SIGHUP/i.test(sidecar.stderr() + sidecar.stdout()) || sidecar.proc.exitCode !== null || sidecar.proc.signalCode !== null,
      'a log line about SIGHUP (or the exit)',
      5000,
    );
    expectAlive(sidecar);
    await expectHealthy(sidecar, () => engine.maxActive);
  });

  it('ends calls cut at the end of the drain grace with UNAVAILABLE, not INTERNAL', async () => {
    const { engine, sidecar } = await readySidecarOverTestEngine(['--drain-grace-ms', '300']);
    const client = clientFor(sidecar);
    const held = Array.from({ length: 2 }, (_, i) => unary(client, 'Hold', { tag: `outlives-grace-${i}` }, { deadlineMs: 30_000 }));
    await waitFor(() => engine.held === 2, 'the calls in the engine');
    expect(await sidecar.stop('SIGTERM')).toBe(0);
    for (const outcome of await Promise.all(held)) expect(outcome.code, `status of a call cut by the drain: ${outcome.details}`).toBe(grpc.status.UNAVAILABLE);
    await waitFor(() => engine.held === 0, 'the engine to see the cut calls go');
    expect(engine.maxActive).toBeLessThanOrEqual(N);
  });

  it('sends none of the queued calls to the engine when the drain grace ends: they are cut first', async () => {
    const { engine, sidecar } = await readySidecarOverTestEngine(['--drain-grace-ms', '300']);
    const client = clientFor(sidecar);
    const inEngine = Array.from({ length: N }, (_, i) => unary(client, 'Hold', { tag: `in-engine-${i}` }, { deadlineMs: 30_000 }));
    await waitFor(() => engine.held === N, 'N calls in the engine');
    const queued = Array.from({ length: 2 }, (_, i) => unary(client, 'Hold', { tag: `queued-${i}` }, { deadlineMs: 30_000 }));
    await waitFor(async () => (await sidecar.metric('dynamo_request_queue')) === 2, 'two calls queued');
    expect(await sidecar.stop('SIGTERM')).toBe(0);
    for (const outcome of await Promise.all([...inEngine, ...queued])) expect(outcome.code, outcome.details).toBe(grpc.status.UNAVAILABLE);
    expect(
      engine.headerArrivals.filter((tag) => tag.startsWith('queued-')),
      'queued calls that reached the engine',
    ).toEqual([]);
  });
});

describe('an engine that answers before the client has finished sending (bidi)', () => {
  it("delivers the engine's status and frees the slot while the client's request side is still open", async () => {
    const engine = await startTestEngine();
    cleanups.push(() => engine.close());
    const sidecar = await sidecarFor(engine.address);
    const client = clientFor(sidecar) as unknown as { Early(metadata: grpc.Metadata): grpc.ClientDuplexStream<{ tag: string }, unknown> };
    const metadata = new grpc.Metadata();
    metadata.set('x-replies', '1');
    const call = client.Early(metadata);
    call.on('data', () => {});
    call.on('error', () => {});
    const status = new Promise<grpc.StatusObject | string>((resolve) => {
      call.on('status', resolve);
      setTimeout(() => resolve('no status within 10 s'), 10_000).unref();
    });
    call.write({ tag: 'bidi' }); // and the request side stays open
    await waitFor(() => engine.early === 1, 'the call in the engine');
    engine.releaseEarly();
    expect(await status).toMatchObject({ code: grpc.status.OK });
    await expectGaugesZero(sidecar, 5000);
    call.end();
    expectAlive(sidecar);
  });
});
