/**
 * The sidecar against hostile clients: raw HTTP/2 frames over a socket (test/support/h2-wire.ts)
 * to the real sidecar process, in front of the in-process test engine, N=4 Q=2 (issue 8).
 *
 * Every case ends with the same check (`expectHealthy`): the process is alive, both gauges are
 * back to 0, a normal gRPC call works, and the engine never held more than N calls at once.
 * A case that kills the sidecar fails there with the exit code, and the next case starts a new one.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { readdirSync, readlinkSync } from 'node:fs';
import { createServer as createNetServer, connect as netConnect, type Server as NetServer, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { testEngineClient, unary } from '../../../support/grpc-client.js';
import {
  ErrorCode,
  FrameType,
  H2Wire,
  Setting,
  continuationFrame,
  dataFrame,
  encodeHeaders,
  grpcRequestHeaders,
  headersFrame,
  headerValue,
  pingFrame,
  rstStreamFrame,
  settingsFrame,
  windowUpdateFrame,
  type H2WireOptions,
  type HeaderList,
} from '../../../support/h2-wire.js';
import { TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { LOADER_OPTIONS, TEST_ENGINE_PROTO, startTestEngine, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

const N = 4;
const Q = 2;
const ADMISSION_ENV = { DYN_ENGINE_REQUEST_LIMIT: String(N), DYN_DYNAMO_REQUEST_QUEUE_LIMIT: String(Q) };
const OK = 0;
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;
const WATCH_PATH = '/grpc.health.v1.Health/Watch';

const echoType = loadSync(TEST_ENGINE_PROTO, LOADER_OPTIONS)['dynamo.sidecar.testing.EchoRequest'] as MessageTypeDefinition<object, object>;
/** One framed EchoRequest message. */
const echo = (request: { payload?: Buffer; count?: number; reply_bytes?: number; tag?: string }): Buffer => frameMessage(echoType.serialize(request));
const path = (method: string): string => `${TEST_ENGINE_PATH}/${method}`;
/** The sockets a process holds (Linux /proc): what a connection left half-open costs it. */
const openSockets = (s: SidecarProcess): number =>
  readdirSync(`/proc/${s.proc.pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${s.proc.pid}/fd/${fd}`).startsWith('socket:');
    } catch {
      return false; // closed while listing
    }
  }).length;

/** A TCP relay in front of the engine that counts the connections the sidecar opens to it. */
interface TcpCounter {
  readonly port: number;
  readonly accepted: number;
  close(): Promise<void>;
}
async function startTcpCounter(targetPort: number): Promise<TcpCounter> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server: NetServer = createNetServer((down) => {
    accepted++;
    const up = netConnect({ host: '127.0.0.1', port: targetPort });
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        down.destroy();
        up.destroy();
      });
    }
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    get accepted() {
      return accepted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function tail(text: string, lines = 15): string {
  return text.trim().split('\n').slice(-lines).join('\n');
}

async function gauges(sidecar: SidecarProcess): Promise<{ engine: number; queue: number }> {
  const text = await sidecar.metrics();
  const read = (name: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  return { engine: read('dynamo_engine_request'), queue: read('dynamo_request_queue') };
}

function expectAlive(sidecar: SidecarProcess): void {
  const { exitCode, signalCode } = sidecar.proc;
  expect(exitCode === null && signalCode === null, `sidecar died: exit code ${exitCode}, signal ${signalCode}\n${tail(sidecar.stderr())}`).toBe(true);
}

/** After a failed look at the system port: if the process is exiting, say so (bounded wait for its exit). */
async function expectAliveAfterError(sidecar: SidecarProcess): Promise<void> {
  await Promise.race([sidecar.exited(), new Promise((resolve) => setTimeout(resolve, 2000))]);
  expectAlive(sidecar);
}

/** Waits (bounded) for both admission gauges to read 0; the failure names the values last read. */
async function expectGaugesZero(sidecar: SidecarProcess, timeoutMs = 10_000): Promise<void> {
  let last = { engine: NaN, queue: NaN };
  try {
    await waitFor(
      async () => {
        last = await gauges(sidecar);
        return last.engine === 0 && last.queue === 0;
      },
      'the admission gauges to return to 0',
      timeoutMs,
      50,
    );
  } catch {
    await expectAliveAfterError(sidecar);
    expect.fail(`gauges did not return to 0 within ${timeoutMs} ms: dynamo_engine_request=${last.engine} dynamo_request_queue=${last.queue}`);
  }
}

/** The end of every case: alive, gauges 0, a normal call works, the engine never saw more than N. */
async function expectHealthy(sidecar: SidecarProcess, engine: TestEngine): Promise<void> {
  expectAlive(sidecar);
  await expectGaugesZero(sidecar);
  const client = testEngineClient(sidecar.address);
  try {
    const outcome = await unary(client, 'Unary', { payload: Buffer.from('still serving') }, { deadlineMs: 10_000 });
    expect(outcome.code, `a normal call after the attack: ${outcome.details}`).toBe(OK);
  } finally {
    client.close();
  }
  expect(engine.maxActive, 'calls inside the engine at once').toBeLessThanOrEqual(N);
  expectAlive(sidecar);
}

describe('hostile clients (N=4, Q=2)', () => {
  let engine: TestEngine;
  let counter: TcpCounter;
  let sidecar: SidecarProcess;
  const wires: H2Wire[] = [];
  const extraSidecars: SidecarProcess[] = [];

  const startShared = (): Promise<SidecarProcess> => startSidecarProcess(['--upstream', `127.0.0.1:${counter.port}`], ADMISSION_ENV);
  const open = async (options: H2WireOptions = {}, port = sidecar.port): Promise<H2Wire> => {
    const wire = await H2Wire.connect(port, options);
    wires.push(wire);
    return wire;
  };
  const alive = (s: SidecarProcess): boolean => s.proc.exitCode === null && s.proc.signalCode === null;

  beforeAll(async () => {
    engine = await startTestEngine();
    counter = await startTcpCounter(engine.port);
    sidecar = await startShared();
  });

  beforeEach(async () => {
    // A case that killed the sidecar has already failed; the next one gets a fresh process.
    const ready = await sidecar.get('/ready').then(
      (r) => r.status === 200,
      () => false,
    );
    if (!ready || !alive(sidecar)) {
      await sidecar.stop('SIGKILL');
      sidecar = await startShared();
    }
    await waitFor(async () => (await sidecar.get('/ready')).status === 200, 'the sidecar to be ready', 10_000);
    engine.autoRelease = () => false;
    engine.resetStats();
  });

  afterEach(async () => {
    for (const wire of wires.splice(0)) wire.destroy();
    engine.releaseHeld();
    engine.releaseEarly();
    engine.releaseSinks();
    for (const s of extraSidecars.splice(0)) await s.stop('SIGKILL');
  });

  afterAll(async () => {
    await sidecar?.stop('SIGKILL');
    await counter?.close();
    await engine?.close();
  });

  /** Fills every engine slot with held calls from a well-behaved client; resolves once the engine holds them. */
  async function fillEngine(tagPrefix: string): Promise<{ done: Promise<unknown>; close: () => void }> {
    const client = testEngineClient(sidecar.address);
    const done = Promise.all(Array.from({ length: N }, (_, i) => unary(client, 'Hold', { tag: `${tagPrefix}-${i}` }, { deadlineMs: 30_000 })));
    await waitFor(() => engine.held === N, `${N} held calls in the engine`);
    return { done, close: () => client.close() };
  }

  // Item 1: a deadline that has passed on arrival must be answered once and never dispatched.
  it('answers calls with expired or tiny deadlines exactly once, never sends them to the engine, and survives the engine answering', async () => {
    const timeouts = ['0m', '0S', '1n', '1u', '10u'];
    const wire = await open();
    const sent: { id: number; tag: string }[] = [];
    const burst = (phase: string): void => {
      for (let i = 0; i < 50; i++) {
        const tag = `expired-${phase}-${i}`;
        const id = wire.sendHeaders(
          grpcRequestHeaders(path('Unary'), [
            ['grpc-timeout', timeouts[i % timeouts.length]!],
            ['x-tag', tag],
          ]),
        );
        // The message goes out, the request side stays open.
        wire.write(dataFrame(id, echo({ payload: Buffer.from(tag) })));
        sent.push({ id, tag });
      }
    };

    const busy = await fillEngine('busy');
    burst('busy');
    await wire.until(() => sent.every(({ id }) => wire.isDone(id)), 10_000, 'an answer to each call while the engine is busy').catch(() => {});
    engine.releaseHeld();
    await busy.done;
    busy.close();
    burst('idle');
    await wire.until(() => sent.every(({ id }) => wire.isDone(id)), 10_000, 'an answer to each call while the engine is idle').catch(() => {});

    // A connection that died with the process shows as unanswered calls: name the crash first.
    if (wire.closed || !sent.every(({ id }) => wire.isDone(id))) await expectAliveAfterError(sidecar);
    for (const { id, tag } of sent) {
      const s = wire.streams.get(id)!;
      const statuses = s.headerBlocks.map((b) => headerValue(b, 'grpc-status')).filter((v) => v !== undefined);
      expect(statuses, `grpc-status answers of ${tag}`).toHaveLength(1);
      expect([DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED], `status of ${tag}`).toContain(Number(statuses[0]));
      // A reset may follow an answer only to close the open request side (NO_ERROR).
      if (s.rstCode !== undefined) expect(s.rstCode, `reset after the answer of ${tag}`).toBe(ErrorCode.NO_ERROR);
    }
    await expectGaugesZero(sidecar);
    // 0m and 0S have passed on arrival, 1n a moment later; 1u and 10u may in theory still be
    // running when the sidecar dispatches, so for them only the single answer is checked.
    const passedOnArrival = new Set(sent.filter((_, i) => i % timeouts.length <= 2).map(({ tag }) => tag));
    const dispatched = engine.headerArrivals.filter((t) => passedOnArrival.has(t));
    expect(dispatched, 'calls the engine received although their deadline had passed at the sidecar').toEqual([]);
    await expectHealthy(sidecar, engine);
  });

  // Item 2: the client resets a call whose body the engine has not read, then the engine answers.
  it('survives RST_STREAM(NO_ERROR) on a call whose body fills the engine window, when the engine answers afterwards (10 runs)', async () => {
    const body = Buffer.concat(Array.from({ length: 128 }, () => echo({ payload: Buffer.alloc(16_000, 0x63) }))); // ~2 MiB
    for (let run = 0; run < 10; run++) {
      expectAlive(sidecar);
      const wire = await open();
      const id = wire.sendHeaders(grpcRequestHeaders(path('Early'), [['x-hold-headers', '1']]));
      const before = engine.early;
      const sending = wire.sendData(id, body, { timeoutMs: 15_000 });
      const s = wire.stream(id);
      await waitFor(() => engine.early > before, `run ${run}: the call to reach the engine`);
      await wire.until(() => s.sendWindow <= 0 || wire.connectionSendWindow <= 0, 10_000, `run ${run}: the flow-control window to fill`);
      wire.rst(id, ErrorCode.NO_ERROR);
      engine.releaseEarly(); // the engine answers (if the call still reaches it)
      await sending;
      await expectGaugesZero(sidecar);
      wire.destroy();
    }
    await expectHealthy(sidecar, engine);
  });

  // Item 3: response headers out, request side open, client reads nothing, then resets with NO_ERROR,
  // while the engine is still streaming or has already finished its side.
  it.each(['still streaming', 'already finished'])(
    'frees the slots of calls reset with NO_ERROR after their response headers (engine %s), while the idle connection stays open',
    async (engineState) => {
      const wire = await open({ settings: [[Setting.INITIAL_WINDOW_SIZE, 0]], autoWindowUpdate: false });
      const ids = Array.from({ length: N }, () =>
        wire.sendHeaders(
          grpcRequestHeaders(path('Early'), [
            ['x-replies', '4'],
            ['x-reply-bytes', '1024'],
          ]),
        ),
      );
      await wire.until(() => ids.every((id) => wire.stream(id).headerBlocks.length > 0), 10_000, 'response headers on every call');
      if (engineState === 'already finished') {
        engine.releaseEarly();
        await waitFor(() => engine.active === 0, 'the engine to finish every call');
      }
      for (const id of ids) wire.rst(id, ErrorCode.NO_ERROR);
      await wire.roundTrip();
      expect(wire.closed, 'the client connection is still open').toBe(false);
      await expectGaugesZero(sidecar, 5000);
      await waitFor(() => engine.early === 0, 'the engine to see every call end', 5000);
      // New calls are admitted while the hostile connection stays open.
      const busy = await fillEngine('after-reset');
      engine.releaseHeld();
      await busy.done;
      busy.close();
      expect(wire.closed).toBe(false);
      await expectHealthy(sidecar, engine);
    },
  );

  // Item 4: timers longer than 2^31-1 ms must not fire at once.
  it.each(['720H', '99999999S'])('lets a call with grpc-timeout %s run to completion', async (timeout) => {
    const wire = await open();
    const tag = `long-deadline-${timeout}`;
    const id = wire.sendHeaders(grpcRequestHeaders(path('Hold'), [['grpc-timeout', timeout]]));
    wire.write(dataFrame(id, echo({ tag }), true));
    await waitFor(() => engine.heldTags.includes(tag) || wire.isDone(id), 'the call to be held in the engine (or ended)');
    engine.releaseHeld();
    await wire.until(() => wire.isDone(id), 10_000, 'the answer');
    expect(wire.grpcStatus(id), `grpc-message: ${wire.grpcMessage(id)}`).toBe(OK);
    await expectHealthy(sidecar, engine);
  });

  // Item 5: connection-specific request headers are normalised or dropped, never break the engine session.
  it('forwards calls with te: Trailers (any case) and http2-settings over one engine connection, without naming the engine', async () => {
    const connectionsBefore = counter.accepted;
    const variants: HeaderList[] = [
      [['te', 'Trailers']],
      [['te', 'TRAILERS']],
      [['http2-settings', 'AAMAAABkAARAAAAAAAIAAAAA']],
      [
        ['te', 'Trailers'],
        ['http2-settings', 'AAMAAABk'],
      ],
    ];
    const wire = await open();
    const ids: number[] = [];
    for (let batch = 0; batch < 50; batch++) {
      const batchIds = Array.from({ length: N + Q }, (_, i) => {
        const id = wire.sendHeaders(grpcRequestHeaders(path('Unary'), variants[(batch * (N + Q) + i) % variants.length]));
        wire.write(dataFrame(id, echo({ payload: Buffer.from('hi') }), true));
        return id;
      });
      await wire.until(() => batchIds.every((id) => wire.isDone(id)), 10_000, `batch ${batch} to be answered`);
      ids.push(...batchIds);
      if (!alive(sidecar) || wire.closed) break;
    }
    expect(ids).toHaveLength(300);
    const failed = ids.filter((id) => wire.grpcStatus(id) !== OK);
    expect(failed.length, `calls not OK; first: grpc-status ${wire.grpcStatus(failed[0]!)} "${wire.grpcMessage(failed[0]!)}"`).toBe(0);
    expect(counter.accepted - connectionsBefore, 'new TCP connections to the engine for 300 calls').toBeLessThanOrEqual(1);
    const text = wire.allText();
    expect(text).not.toContain(`127.0.0.1:${counter.port}`);
    expect(text).not.toContain(`:${engine.port}`);
    await expectHealthy(sidecar, engine);
  });

  // Item 7: the per-connection stream limit is advertised.
  it('advertises SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)', async () => {
    const wire = await open();
    await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
    expect(wire.peerSettings.get(Setting.MAX_CONCURRENT_STREAMS)).toBe(1000);
    await expectHealthy(sidecar, engine);
  });

  it('refuses streams beyond --max-concurrent-streams on one connection', async () => {
    const limited = await startSidecarProcess(['--upstream', engine.address, '--max-concurrent-streams', '50'], ADMISSION_ENV);
    extraSidecars.push(limited);
    const wire = await open({}, limited.port);
    await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
    expect(wire.peerSettings.get(Setting.MAX_CONCURRENT_STREAMS)).toBe(50);
    const ids = Array.from({ length: 80 }, () => {
      const id = wire.sendHeaders(grpcRequestHeaders(WATCH_PATH));
      wire.write(dataFrame(id, frameMessage(Buffer.alloc(0)), true));
      return id;
    });
    // Watch streams stay open: 50 answered with headers, the rest refused (or the connection ended).
    await wire
      .until(
        () => wire.closed || ids.filter((id) => wire.stream(id).headerBlocks.length > 0 || wire.stream(id).rstCode !== undefined).length === ids.length,
        10_000,
        'an answer or a refusal for every stream',
      )
      .catch(() => {});
    const answered = ids.filter((id) => wire.stream(id).headerBlocks.length > 0 && wire.stream(id).rstCode === undefined);
    const refused = ids.filter((id) => [ErrorCode.REFUSED_STREAM, ErrorCode.PROTOCOL_ERROR].includes(wire.stream(id).rstCode as 7 | 1));
    expect(answered.length, 'streams served on one connection').toBeLessThanOrEqual(50);
    // Node may end the whole connection (GOAWAY, or just the socket on a loaded machine, before the
    // GOAWAY frame is read) instead of refusing streams one by one: unanswered streams count as refused.
    expect(refused.length + (wire.goaway || wire.closed ? ids.length - answered.length : 0), 'streams refused').toBeGreaterThanOrEqual(30);
    await expectHealthy(limited, engine);
  });

  it('keeps RSS bounded when one connection opens 10,000 health Watch streams', async () => {
    const rssBefore = await sidecar.metric('process_resident_memory_bytes');
    const wire = await open();
    await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
    const empty = frameMessage(Buffer.alloc(0));
    for (let chunk = 0; chunk < 20; chunk++) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 500; i++) {
        const id = wire.allocStream();
        frames.push(headersFrame(id, encodeHeaders(grpcRequestHeaders(WATCH_PATH))), dataFrame(id, empty, true));
      }
      if (!(await wire.writeAndDrain(Buffer.concat(frames)))) break;
    }
    // Let the sidecar take in what it accepted: it has read everything, and its answers stop changing.
    await wire.roundTrip(20_000);
    let seen = -1;
    await waitFor(
      () => {
        const now = wire.frames.length;
        const settled = now === seen;
        seen = now;
        return settled || wire.closed;
      },
      'the sidecar to answer the watch streams',
      20_000,
      500,
    );
    const answered = [...wire.streams.values()].filter((s) => s.headerBlocks.length > 0 && s.rstCode === undefined).length;
    const rssAfter = await sidecar.metric('process_resident_memory_bytes');
    const growthMiB = Math.round((rssAfter - rssBefore) / 2 ** 20);
    expect(answered, `watch streams served on one connection (RSS grew ${growthMiB} MiB)`).toBeLessThanOrEqual(1000);
    expect(growthMiB, 'RSS growth in MiB').toBeLessThan(40);
    wire.destroy();
    await expectHealthy(sidecar, engine);
  });

  // Item 8: handshake and idle timeouts on the ingress and the system port.
  describe('connection timeouts (handshake 500 ms, idle 1000 ms)', () => {
    let timed: SidecarProcess;
    beforeAll(async () => {
      timed = await startSidecarProcess(['--upstream', engine.address], {
        ...ADMISSION_ENV,
        DYN_SIDECAR_IDLE_TIMEOUT_MS: '1000',
        DYN_SIDECAR_HANDSHAKE_TIMEOUT_MS: '500',
      });
    });
    afterAll(async () => {
      await timed?.stop('SIGKILL');
    });

    it('closes a TCP connection that never sends the preface after the handshake timeout', async () => {
      const wire = await open({ handshake: false }, timed.port);
      await wire.waitClosed(6000);
      await expectHealthy(timed, engine);
    });

    it('sends GOAWAY and closes a connection that opens no stream after the idle timeout', async () => {
      const wire = await open({}, timed.port);
      await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
      await wire.waitClosed(8000);
      expect(wire.goaway, 'GOAWAY before the close').toBeDefined();
      await expectHealthy(timed, engine);
    });

    it('frees the sockets of idled-out clients that never answer our FIN (half-open): a delayed close after the GOAWAY', async () => {
      const before = openSockets(timed);
      const wires = await Promise.all(Array.from({ length: 10 }, () => open({ halfOpen: true }, timed.port)));
      // Each connection holds a health Watch open, so none is idle (and none can close) while they are
      // counted, however long the machine takes to open them; the idle clocks start at the cancels.
      const watches = wires.map((wire) => {
        const id = wire.sendHeaders(grpcRequestHeaders(WATCH_PATH));
        wire.write(dataFrame(id, frameMessage(Buffer.alloc(0)), true));
        return id;
      });
      for (const [i, wire] of wires.entries()) await wire.until(() => wire.stream(watches[i]!).headerBlocks.length > 0, 10_000, 'the Watch answer');
      expect(openSockets(timed)).toBeGreaterThanOrEqual(before + 10);
      expect(wires.some((wire) => wire.goaway !== undefined)).toBe(false);
      for (const [i, wire] of wires.entries()) wire.rst(watches[i]!);
      await waitFor(() => wires.every((wire) => wire.goaway !== undefined), 'GOAWAY on every idle connection', 8000);
      // idle 1000 ms, our FIN, then 1000 ms for the client's: the sidecar lets go of every socket although no client closed.
      await waitFor(() => openSockets(timed) <= before, 'the sidecar to close the half-open sockets', 8000);
      expect(wires.some((wire) => wire.closed)).toBe(false);
      await expectHealthy(timed, engine);
    });

    it('closes a slow-drip HEADERS/CONTINUATION connection (one frame every 200 ms, never END_HEADERS)', async () => {
      const wire = await open({}, timed.port);
      const id = wire.allocStream();
      wire.write(headersFrame(id, encodeHeaders(grpcRequestHeaders(path('Unary'))), { endHeaders: false }));
      const started = Date.now();
      for (let drip = 0; drip < 50 && !wire.closed; drip++) {
        await new Promise((resolve) => setTimeout(resolve, 200)); // the attack itself is slow
        wire.write(continuationFrame(id, encodeHeaders([[`x-drip-${drip}`, 'x']])));
      }
      expect(wire.closed, `connection still open after ${Date.now() - started} ms of slow drip`).toBe(true);
      await expectHealthy(timed, engine);
    });

    it.each([
      ['DATA on stream 0', (wire: H2Wire) => wire.write(dataFrame(0, Buffer.alloc(3)))],
      ['RST_STREAM on stream 0', (wire: H2Wire) => wire.write(rstStreamFrame(0, ErrorCode.CANCEL))],
    ])(
      'frees the slots of calls on a connection node stopped reading after a protocol error (%s), socket kept open or closed',
      async (_name, breakConnection) => {
        for (const closeSocket of [false, true]) {
          const wires = [];
          for (let i = 0; i < 4; i++) {
            const wire = await open({}, timed.port);
            await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
            wire.sendHeaders(grpcRequestHeaders(path('Hold'), [['x-tag', 'broken-connection']])); // no grpc-timeout
            await wire.roundTrip();
            breakConnection(wire);
            if (closeSocket) wire.destroy();
            wires.push(wire);
          }
          // Node emits nothing for such a connection; the PING liveness check (one handshake
          // timeout per tick) must destroy it and free the slots.
          await expectGaugesZero(timed, 10_000);
          for (const wire of wires) wire.destroy();
        }
        await expectHealthy(timed, engine);
      },
    );

    it('closes idle and slow-drip connections on the system port', async () => {
      const idle = netConnect({ host: '127.0.0.1', port: timed.systemPort });
      const drip = netConnect({ host: '127.0.0.1', port: timed.systemPort });
      // Both sockets are read: the sidecar may answer a connection it closes with node's 408
      // (headersTimeout) before its FIN, and a socket whose received bytes are never consumed
      // never sees that FIN, so it would never close ('end' waits for the buffered bytes).
      const received = new Map<Socket, string>();
      const closed = (s: Socket): Promise<void> =>
        new Promise((resolve) => {
          received.set(s, '');
          s.on('data', (chunk: Buffer) => received.set(s, received.get(s)! + chunk.toString('latin1')));
          s.on('error', () => {});
          s.on('close', () => resolve());
        });
      const idleClosed = closed(idle);
      const dripClosed = closed(drip);
      let dripDone = false;
      void dripClosed.then(() => (dripDone = true));
      drip.write('GET /metrics HTTP/1.1\r\nHost: x\r\n');
      for (let i = 0; i < 50 && !dripDone; i++) {
        await new Promise((resolve) => setTimeout(resolve, 200)); // the attack itself is slow
        drip.write(`x-drip-${i}: x\r\n`);
      }
      expect(dripDone, 'slow-drip HTTP/1 request still open after 10 s').toBe(true);
      await Promise.race([idleClosed, new Promise((_, reject) => setTimeout(() => reject(new Error('idle system-port connection still open')), 5000))]);
      // A connection that never sent a request gets nothing, or node's 408, before the close.
      expect(received.get(idle), 'bytes the idle connection received').toMatch(/^(HTTP\/1\.1 408 [^]*)?$/);
      idle.destroy();
      drip.destroy();
      await expectHealthy(timed, engine);
    });
  });

  // Known HTTP/2 attacks.
  // The attack must not reach the engine's shared session: today the sidecar dispatches the reset
  // calls, relays the reset burst, and the engine's own HTTP/2 stack drops the session (GOAWAY),
  // taking every other client's calls with it.
  it('survives Rapid Reset (5,000 HEADERS each followed at once by RST_STREAM(CANCEL)) without losing the engine session', async () => {
    const connectionsBefore = counter.accepted;
    const rapidBefore = engine.headerArrivals.filter((tag) => tag === 'rapid').length;
    const wire = await open();
    for (let chunk = 0; chunk < 10 && !wire.closed; chunk++) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 500; i++) {
        const id = wire.allocStream();
        frames.push(headersFrame(id, encodeHeaders(grpcRequestHeaders(path('Unary'), [['x-tag', 'rapid']]))), rstStreamFrame(id, ErrorCode.CANCEL));
      }
      await wire.writeAndDrain(Buffer.concat(frames));
    }
    await wire.roundTrip(); // the sidecar has read the whole attack (or closed the connection)
    await expectGaugesZero(sidecar);
    // Once the connection has reset a call early, its calls wait for the end of the read, and
    // those reset in it never reach the engine: only the first one or two do (before the
    // dispatch turn, about 1,000 of the 5,000 did).
    const rapidReached = engine.headerArrivals.filter((tag) => tag === 'rapid').length - rapidBefore;
    expect(rapidReached, 'reset calls that reached the engine').toBeLessThan(10);
    const client = testEngineClient(sidecar.address);
    try {
      const outcomes = [];
      for (let i = 0; i < 10; i++) outcomes.push(await unary(client, 'Unary', { payload: Buffer.from('after') }, { deadlineMs: 10_000 }));
      expect(
        outcomes.filter((o) => o.code !== grpc.status.OK).map((o) => o.details),
        'normal calls right after the attack',
      ).toEqual([]);
    } finally {
      client.close();
    }
    expect(counter.accepted - connectionsBefore, 'new engine connections (the shared session was dropped)').toBe(0);
    await expectHealthy(sidecar, engine);
  });

  it('takes no new calls from a client that resets most calls before any answer, spread over separate reads, and lets its open call finish (graceful GOAWAY)', async () => {
    const wire = await open();
    await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
    // A call already running on the connection: the shed must not cost it its stream.
    const tag = 'bystander-of-slow-rapid';
    const held = wire.sendHeaders(grpcRequestHeaders(path('Hold'), [['x-tag', tag]]));
    wire.write(dataFrame(held, echo({ tag }), true));
    await waitFor(() => engine.heldTags.includes(tag), 'the bystander call to be held in the engine');
    let sent = 0;
    // Each HEADERS is read (and dispatched) before its RST_STREAM: the slow variant of Rapid Reset.
    for (; sent < 300 && !wire.closed && !wire.goaway; sent++) {
      const id = wire.sendHeaders(grpcRequestHeaders(path('Unary'), [['x-tag', 'slow-rapid']]));
      await wire.roundTrip();
      wire.write(rstStreamFrame(id, ErrorCode.CANCEL));
    }
    await wire.until(() => wire.goaway !== undefined || wire.closed, 5000, 'the sidecar to end the connection');
    expect(wire.goaway, `GOAWAY after ${sent}`).toMatchObject({ code: ErrorCode.NO_ERROR });
    expect(wire.goaway!.lastStreamId, 'last stream id: the calls it processed').toBeGreaterThanOrEqual(held);
    expect(sent, 'streams opened before the connection was ended').toBeLessThan(300);
    expect(sent).toBeGreaterThanOrEqual(100);
    expect(sidecar.stderr(), 'the shed is logged').toContain('Rapid Reset');
    expect(wire.isDone(held), 'the bystander call is still open').toBe(false);
    engine.releaseHeld();
    await wire.until(() => wire.isDone(held), 10_000, "the bystander call's answer");
    expect(wire.grpcStatus(held), `grpc-message: ${wire.grpcMessage(held)}`).toBe(OK);
    await wire.until(() => wire.closed, 5000, 'the connection to end once its last call has');
    await expectHealthy(sidecar, engine);
  });

  it('survives a CONTINUATION flood (10,000 frames, never END_HEADERS)', async () => {
    const wire = await open();
    const id = wire.allocStream();
    wire.write(headersFrame(id, encodeHeaders(grpcRequestHeaders(path('Unary'))), { endHeaders: false }));
    for (let chunk = 0; chunk < 10 && !wire.closed; chunk++) {
      const frames = Array.from({ length: 1000 }, (_, i) => continuationFrame(id, encodeHeaders([[`x-c${chunk}-${i}`, 'v'.repeat(64)]])));
      await wire.writeAndDrain(Buffer.concat(frames));
    }
    await wire.waitClosed(10_000);
    await expectHealthy(sidecar, engine);
  });

  it('refuses a 1 MiB header list without passing it on', async () => {
    const wire = await open();
    const id = wire.allocStream();
    const big: HeaderList = Array.from({ length: 1024 }, (_, i) => [`x-big-${i}`, 'h'.repeat(1000)]);
    const block = encodeHeaders([...grpcRequestHeaders(path('Unary'), [['x-tag', 'huge-headers']]), ...big]);
    const frames: Buffer[] = [headersFrame(id, block.subarray(0, 16_384), { endHeaders: false })];
    for (let at = 16_384; at < block.length; at += 16_384) frames.push(continuationFrame(id, block.subarray(at, at + 16_384), at + 16_384 >= block.length));
    await wire.writeAndDrain(Buffer.concat(frames));
    await wire.writeAndDrain(dataFrame(id, echo({}), true));
    await wire.until(() => wire.isDone(id), 10_000, 'the huge header list to be refused');
    expect(wire.grpcStatus(id) === OK, 'a 1 MiB header list was served').toBe(false);
    expect(engine.headerArrivals).not.toContain('huge-headers');
    await expectHealthy(sidecar, engine);
  });

  it.each([
    ['an HTTP/1.1 request', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')],
    ['random bytes', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 256))],
    ['a truncated preface then garbage', Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n'), Buffer.alloc(100, 0xff)])],
  ])('closes a connection that sends %s instead of the preface', async (_name, bytes) => {
    const wire = await open({ handshake: false });
    wire.write(bytes);
    await wire.waitClosed(10_000);
    await expectHealthy(sidecar, engine);
  });

  it('survives a SETTINGS flood (20,000 frames, acks not read)', async () => {
    const wire = await open();
    wire.socket.pause();
    const one = settingsFrame([
      [Setting.INITIAL_WINDOW_SIZE, 65_535],
      [Setting.MAX_FRAME_SIZE, 16_384],
    ]);
    for (let chunk = 0; chunk < 10 && !wire.closed; chunk++) await wire.writeAndDrain(Buffer.concat(Array.from({ length: 2000 }, () => one)), 5000);
    wire.destroy();
    await expectHealthy(sidecar, engine);
  });

  it('survives a PING flood (100,000 frames, acks not read)', async () => {
    const wire = await open();
    wire.socket.pause();
    const ping = pingFrame(Buffer.from('hostile!'));
    for (let chunk = 0; chunk < 20 && !wire.closed; chunk++) await wire.writeAndDrain(Buffer.concat(Array.from({ length: 5000 }, () => ping)), 5000);
    const rss = await sidecar.metric('process_resident_memory_bytes');
    expect(rss / 2 ** 20, 'RSS in MiB while the ping acks are unread').toBeLessThan(400);
    wire.destroy();
    await expectHealthy(sidecar, engine);
  });

  it('ends the connection on a connection-level WINDOW_UPDATE past 2^31-1', async () => {
    const wire = await open();
    await wire.until(() => wire.peerSettingsReceived, 5000, "the sidecar's SETTINGS");
    wire.write(Buffer.concat([windowUpdateFrame(0, 2 ** 31 - 1), windowUpdateFrame(0, 2 ** 31 - 1)]));
    await wire.waitClosed(10_000);
    expect(wire.goaway, 'GOAWAY before the close').toBeDefined();
    expect(wire.goaway!.code, 'GOAWAY error code').not.toBe(ErrorCode.NO_ERROR);
    await expectHealthy(sidecar, engine);
  });

  it('resets a call whose stream WINDOW_UPDATE goes past 2^31-1 and frees its slot', async () => {
    const wire = await open();
    const tag = 'window-overflow';
    const id = wire.sendHeaders(grpcRequestHeaders(path('Hold')));
    wire.write(dataFrame(id, echo({ tag }), true));
    await waitFor(() => engine.heldTags.includes(tag), 'the call to be held in the engine');
    wire.write(Buffer.concat([windowUpdateFrame(id, 2 ** 31 - 1), windowUpdateFrame(id, 2 ** 31 - 1)]));
    await wire.until(() => wire.isDone(id), 10_000, 'the stream to be reset');
    if (!wire.closed) expect(wire.stream(id).rstCode).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    await waitFor(() => !engine.heldTags.includes(tag), 'the engine to see the call cancelled');
    await expectHealthy(sidecar, engine);
  });

  it('frees the slots of calls to a zero-window client that never reads when their deadline passes', async () => {
    const wire = await open({ settings: [[Setting.INITIAL_WINDOW_SIZE, 0]], autoWindowUpdate: false });
    const ids = Array.from({ length: N }, (_, i) => {
      const id = wire.sendHeaders(grpcRequestHeaders(path('ServerStream'), [['grpc-timeout', '1S']]));
      wire.write(dataFrame(id, echo({ count: 200, reply_bytes: 1000, tag: `zero-window-${i}` }), true));
      return id;
    });
    await wire.until(() => ids.every((id) => wire.stream(id).headerBlocks.length > 0 || wire.isDone(id)), 10_000, 'the calls to start');
    await expectGaugesZero(sidecar, 10_000);
    expect(wire.closed, 'the client connection is still open').toBe(false);
    await expectHealthy(sidecar, engine);
  });

  // RST_STREAM with every error code at every point of a call.
  const RESET_POINTS = ['after HEADERS', 'after some DATA', 'after response headers', 'after END_STREAM'] as const;
  it.each(RESET_POINTS)('frees the slot on RST_STREAM with every error code 0..13 %s', async (point) => {
    const wire = await open();
    const codes = Array.from({ length: 14 }, (_, code) => code);
    for (let at = 0; at < codes.length; at += N) {
      const group = codes.slice(at, at + N);
      const heldBefore = engine.early + engine.held;
      const ids = group.map((code) => {
        const tag = `rst-${point}-${code}`;
        if (point === 'after END_STREAM') {
          const id = wire.sendHeaders(grpcRequestHeaders(path('Hold')));
          wire.write(dataFrame(id, echo({ tag }), true));
          return id;
        }
        const extra: HeaderList = point === 'after response headers' ? [['x-replies', '1']] : [['x-hold-headers', '1']];
        const id = wire.sendHeaders(grpcRequestHeaders(path('Early'), [...extra, ['x-tag', tag]]));
        if (point === 'after some DATA') wire.write(dataFrame(id, echo({ payload: Buffer.alloc(1000) })));
        return id;
      });
      if (point !== 'after HEADERS')
        await waitFor(() => engine.early + engine.held === heldBefore + group.length, `${point}: the engine to hold codes ${group.join(',')}`);
      if (point === 'after response headers') await wire.until(() => ids.every((id) => wire.stream(id).headerBlocks.length > 0), 10_000, 'response headers');
      group.forEach((code, i) => wire.rst(ids[i]!, code));
      await expectGaugesZero(sidecar);
      // The engine sees each cancel a moment after the sidecar frees the slot; a call the sidecar
      // forgot to cancel stays held for good.
      await waitFor(() => engine.early + engine.held === 0, `${point}: the engine to see codes ${group.join(',')} cancelled`, 5000).catch(() => {});
      expect([...engine.earlyTags, ...engine.heldTags], 'calls still held in the engine after their client reset them').toEqual([]);
      expectAlive(sidecar);
    }
    await expectHealthy(sidecar, engine);
  });

  it('reads its own SETTINGS frames (sanity: the raw client speaks HTTP/2 to the sidecar)', async () => {
    const wire = await open();
    const id = wire.sendHeaders(grpcRequestHeaders(path('Unary')));
    wire.write(dataFrame(id, echo({ payload: Buffer.from('raw') }), true));
    await wire.until(() => wire.isDone(id), 10_000, 'the answer');
    expect(wire.grpcStatus(id)).toBe(OK);
    expect(wire.frames.some((f) => f.type === FrameType.SETTINGS)).toBe(true);
    await expectHealthy(sidecar, engine);
  });
});
