/**
 * WorkerLoadService (dynamo.sidecar.v1.WorkerLoad/Watch): with fake streams and a fake clock for
 * the timing rules (at once, debounced change, heartbeat, publishNow, back-pressure, clean-up),
 * then over a real HTTP/2 pair with grpc-js and raw node:http2 clients for the wire, the end
 * statuses and real flow control.
 */
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { connect, constants, createServer, type ClientHttp2Session, type Http2Server, type OutgoingHttpHeaders, type ServerHttp2Session } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { SHUTDOWN_MESSAGE, WORKER_LOAD_WATCH_PATH, WorkerLoadService, type WatchStream } from '../../../../src/sidecar/load/worker-load-service.js';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { fakeClock } from '../../../support/fake-call-streams.js';
import { waitFor } from '../../../support/wait.js';

const PROTO = join(PROTO_DIR, 'dynamo/sidecar/v1/worker_load.proto');
const LOADER = { keepCase: true, longs: Number, defaults: false } as const;
const definition = loadSync(PROTO, LOADER);
const UpdateType = definition['dynamo.sidecar.v1.WorkerLoadUpdate'] as MessageTypeDefinition<unknown, Update>;

interface Rank {
  worker_id: number;
  dp_rank?: number;
  engine_request?: number;
  kv_used_blocks?: number;
  kv_total_blocks?: number;
  engine_request_limit?: number;
  draining?: boolean;
  overloaded?: boolean;
  sequence: number;
  timestamp_ms: number;
  model?: string;
  grpc_address: string;
  heartbeat_ms: number;
  [field: string]: unknown;
}
interface Update {
  ranks: Rank[];
}

/** Splits gRPC length-prefixed messages and decodes each as a WorkerLoadUpdate. */
function decodeFrames(bytes: Buffer): Update[] {
  const updates: Update[] = [];
  for (let at = 0; at + 5 <= bytes.length;) {
    const length = bytes.readUInt32BE(at + 1);
    updates.push(UpdateType.deserialize(bytes.subarray(at + 5, at + 5 + length)));
    at += 5 + length;
  }
  return updates;
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A Watch stream as the service sees it. While `reading`, a write leaves node's buffer at once
 * (its callback runs); otherwise callbacks wait for read(), as they wait for the client's
 * flow-control window on a real stream.
 */
class FakeWatchStream extends EventEmitter implements WatchStream {
  destroyed = false;
  closed = false;
  reading = true;
  ended = false;
  private readonly unsent: (() => void)[] = [];
  headers: OutgoingHttpHeaders | undefined;
  trailers: OutgoingHttpHeaders | undefined;
  readonly updates: Update[] = [];

  respond(headers: OutgoingHttpHeaders, options: { waitForTrailers: boolean }): void {
    expect(options.waitForTrailers).toBe(true);
    this.headers = headers;
  }

  write(chunk: Buffer, done: () => void): boolean {
    if (this.ended || this.closed) throw new Error('write after end');
    this.updates.push(...decodeFrames(chunk));
    this.unsent.push(done);
    if (this.reading) this.read();
    return this.unsent.length === 0;
  }

  /** The client reads what was written: every pending write callback runs. */
  read(): void {
    this.reading = true;
    for (let done = this.unsent.shift(); done; done = this.unsent.shift()) done();
  }

  end(): void {
    this.ended = true;
    this.emit('wantTrailers');
  }

  sendTrailers(trailers: OutgoingHttpHeaders): void {
    this.trailers = trailers;
    this.closed = true;
    this.emit('close');
  }

  /** The client cancelled (RST_STREAM). */
  cancel(): void {
    this.closed = true;
    this.emit('close');
  }

  get last(): Rank {
    return this.updates[this.updates.length - 1]!.ranks[0]!;
  }
}

function setup(options: { heartbeatMs?: number; dataParallelSize?: number } = {}) {
  const clock = fakeClock();
  const predicted: { ttftMs: number | undefined } = { ttftMs: undefined };
  const tracker = new LoadTracker({
    predictTtftMs: () => predicted.ttftMs,
    workerId: 77,
    dataParallelSize: options.dataParallelSize ?? 1,
    heartbeatMs: options.heartbeatMs ?? 1000,
    grpcAddress: '10.0.0.5:50050',
    kvTotalBlocks: 512,
    now: () => 1_000_000 + clock.timers.now,
  });
  const service = new WorkerLoadService({ source: tracker, heartbeatMs: options.heartbeatMs ?? 1000, debounceMs: 5, timers: clock });
  const listeners = (): number => (tracker as unknown as { listeners: Set<unknown> }).listeners.size;
  const watch = (): FakeWatchStream => {
    const stream = new FakeWatchStream();
    service.watch(stream);
    return stream;
  };
  return { clock, tracker, service, listeners, watch, predicted };
}

const admission = (engineRequest: number) => ({ engineRequest, requestQueue: 0, limit: 8, queueLimit: 4 });

describe('WorkerLoadService with fake streams and a fake clock', () => {
  it('sends the current load at once, every event field mapped, unknown optionals left out and no model as ""', () => {
    const { tracker, watch, predicted } = setup({ dataParallelSize: 2 });
    const stream = watch();
    expect(stream.headers).toMatchObject({ ':status': 200, 'content-type': 'application/grpc' });
    expect(stream.updates).toHaveLength(1);
    const [r0, r1] = stream.updates[0]!.ranks;
    expect(r0).toEqual({
      worker_id: 77,
      dp_rank: 0,
      active_decode_blocks: 0,
      active_prefill_tokens: 0,
      kv_total_blocks: 512,
      engine_request: 0,
      request_queue: 0,
      overloaded: false,
      draining: false,
      timestamp_ms: 1_000_000,
      sequence: 1,
      model: '',
      grpc_address: '10.0.0.5:50050',
      heartbeat_ms: 1000,
    });
    expect(r1).toMatchObject({ dp_rank: 1, sequence: 1 });
    expect(r0).not.toHaveProperty('kv_used_blocks');
    expect(r0).not.toHaveProperty('engine_request_limit');
    expect(r0).not.toHaveProperty('predicted_ttft_ms');

    predicted.ttftMs = 87;
    tracker.setModel('llama');
    tracker.setAdmission(admission(3));
    tracker.applyScrape(new Map([[0, { kvUsedBlocks: 40, kvTotalBlocks: 1024 }]]), false);
    const later = watch();
    expect(later.last).toMatchObject({
      model: 'llama',
      predicted_ttft_ms: 87,
      engine_request: 3,
      engine_request_limit: 8,
      kv_used_blocks: 40,
      kv_total_blocks: 1024,
      sequence: 1,
    });
  });

  it('turns a burst of changes into one update after the debounce, with sequence rising by one per update on the stream', () => {
    const { clock, tracker, watch } = setup();
    const stream = watch();
    for (let n = 1; n <= 20; n++) tracker.setAdmission(admission(n));
    expect(stream.updates).toHaveLength(1);
    clock.timers.advance(4);
    expect(stream.updates).toHaveLength(1);
    clock.timers.advance(1);
    expect(stream.updates).toHaveLength(2);
    expect(stream.last).toMatchObject({ engine_request: 20, sequence: 2 });
    tracker.setAdmission(admission(0));
    clock.timers.advance(5);
    expect(stream.updates.map((u) => u.ranks[0]!.sequence)).toEqual([1, 2, 3]);
    expect(stream.last.engine_request ?? 0).toBe(0);
  });

  it('sends a heartbeat every heartbeat_ms when nothing changes, counted from the last update', () => {
    const { clock, tracker, watch } = setup({ heartbeatMs: 200 });
    const stream = watch();
    clock.timers.advance(199);
    expect(stream.updates).toHaveLength(1);
    clock.timers.advance(1);
    expect(stream.updates).toHaveLength(2);
    clock.timers.advance(200);
    expect(stream.updates).toHaveLength(3);
    expect(stream.last).toMatchObject({ timestamp_ms: 1_000_400, sequence: 3, heartbeat_ms: 200 });
    // A change-driven update restarts the heartbeat.
    clock.timers.advance(100);
    tracker.setAdmission(admission(1));
    clock.timers.advance(5); // t=505: the debounced update
    expect(stream.updates).toHaveLength(4);
    clock.timers.advance(199);
    expect(stream.updates).toHaveLength(4);
    clock.timers.advance(1);
    expect(stream.updates).toHaveLength(5);
  });

  it('publishNow sends at once and replaces the pending debounced update', () => {
    const { clock, tracker, service, watch } = setup();
    const stream = watch();
    tracker.markRejected();
    service.publishNow();
    expect(stream.updates).toHaveLength(2);
    expect(stream.last.overloaded).toBe(true);
    clock.timers.advance(10);
    expect(stream.updates, 'no second update for the same change').toHaveLength(2);
  });

  it('keeps one update in flight for a watcher that does not read, skipping the rest, and sends it the latest state once it reads', () => {
    const { clock, tracker, service, watch } = setup();
    const slow = new FakeWatchStream();
    slow.reading = false;
    service.watch(slow); // the first update stays in node's buffer
    const fast = watch();
    for (let n = 1; n <= 6; n++) {
      tracker.setAdmission(admission(n));
      clock.timers.advance(5);
    }
    clock.timers.advance(1000); // a heartbeat too
    expect(slow.updates, 'nothing more written while the last update is unsent').toHaveLength(1);
    expect(fast.updates, 'the other watcher is not held back').toHaveLength(8);
    expect(service.stats.skipped).toBe(7);
    tracker.setAdmission(admission(7)); // changed again, still unread
    slow.read();
    expect(slow.updates).toHaveLength(2);
    expect(slow.last).toMatchObject({ engine_request: 7, sequence: 2 });
    slow.read(); // nothing skipped since: nothing sent
    expect(slow.updates).toHaveLength(2);
    clock.timers.advance(5);
    expect(slow.updates, 'and it follows the changes again').toHaveLength(3);
  });

  it('keeps no listener or timer once every watcher has gone, however many came and went', () => {
    const { clock, tracker, service, listeners, watch } = setup();
    expect([service.watcherCount, service.armedTimers, listeners()]).toEqual([0, 0, 0]);
    const streams = Array.from({ length: 100 }, () => watch());
    tracker.setAdmission(admission(1)); // a debounce pending too
    expect(service.watcherCount).toBe(100);
    expect(listeners()).toBe(1);
    expect(service.armedTimers).toBe(2);
    for (const stream of streams) stream.cancel();
    expect([service.watcherCount, service.armedTimers, listeners()]).toEqual([0, 0, 0]);
    expect(clock.timers.active).toBe(0);
    for (const stream of streams) expect(stream.listenerCount('close')).toBe(1);
    // Changes and time with nobody watching write nothing.
    tracker.setAdmission(admission(2));
    clock.timers.advance(5000);
    expect(streams[0]!.updates).toHaveLength(1);
  });

  it('close() ends every watch with UNAVAILABLE after what was written, and answers later watches the same at once', () => {
    const { clock, service, listeners, watch } = setup();
    const a = watch();
    const b = watch();
    service.close();
    for (const stream of [a, b]) {
      expect(stream.ended).toBe(true);
      expect(stream.trailers).toMatchObject({ 'grpc-status': String(grpc.status.UNAVAILABLE), 'grpc-message': SHUTDOWN_MESSAGE });
      expect(stream.updates).toHaveLength(1);
    }
    expect([service.watcherCount, service.armedTimers, listeners(), clock.timers.active]).toEqual([0, 0, 0, 0]);
    const late = watch();
    expect(late.updates).toHaveLength(0);
    expect(late.trailers).toMatchObject({ 'grpc-status': String(grpc.status.UNAVAILABLE) });
    service.publishNow(); // harmless after close
  });
});

describe('WorkerLoadService over a real HTTP/2 connection', () => {
  interface Served {
    readonly service: WorkerLoadService;
    readonly tracker: LoadTracker;
    readonly address: string;
    readonly port: number;
  }

  async function serve(heartbeatMs = 60_000): Promise<Served> {
    const tracker = new LoadTracker({ workerId: 5, heartbeatMs, grpcAddress: '127.0.0.1:1', model: 'm' });
    const service = new WorkerLoadService({ source: tracker, heartbeatMs });
    const server: Http2Server = createServer();
    const sessions = new Set<ServerHttp2Session>();
    server.on('session', (session) => {
      sessions.add(session);
      session.on('error', () => {});
      session.on('close', () => sessions.delete(session));
    });
    server.on('stream', (stream, headers) =>
      service.handles(headers[':path']) ? service.serve(stream, headers) : stream.respond({ ':status': 404 }, { endStream: true }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          service.close();
          server.close(() => resolve());
          for (const session of sessions) session.destroy();
        }),
    );
    const port = (server.address() as { port: number }).port;
    return { service, tracker, address: `127.0.0.1:${port}`, port };
  }

  type WatchClient = grpc.Client & { Watch(request: object): grpc.ClientReadableStream<Update> };
  function client(address: string): WatchClient {
    const pkg = grpc.loadPackageDefinition(loadSync(PROTO, LOADER)) as unknown as {
      dynamo: { sidecar: { v1: { WorkerLoad: grpc.ServiceClientConstructor } } };
    };
    const c = new pkg.dynamo.sidecar.v1.WorkerLoad(address, grpc.credentials.createInsecure()) as unknown as WatchClient;
    cleanups.push(() => c.close());
    return c;
  }

  function h2(port: number, settings: { initialWindowSize?: number } = {}): ClientHttp2Session {
    const session = connect(`http://127.0.0.1:${port}`, { settings });
    session.on('error', () => {});
    cleanups.push(() => session.destroy());
    return session;
  }

  it('streams updates a grpc-js client decodes, and forgets a watcher as soon as its client cancels', async () => {
    const { service, tracker, address } = await serve();
    const watch = client(address).Watch({});
    const got: Update[] = [];
    watch.on('data', (u: Update) => got.push(u));
    const status = new Promise<grpc.StatusObject>((resolve) => watch.on('status', resolve));
    watch.on('error', () => {});
    await waitFor(() => got.length === 1, 'the first update');
    expect(got[0]!.ranks[0]).toMatchObject({ worker_id: 5, model: 'm', grpc_address: '127.0.0.1:1', heartbeat_ms: 60_000, sequence: 1 });
    tracker.setAdmission(admission(4));
    await waitFor(() => got.length === 2, 'the update for the change');
    expect(got[1]!.ranks[0]).toMatchObject({ engine_request: 4, sequence: 2 });
    expect(service.watcherCount).toBe(1);
    watch.cancel();
    expect((await status).code).toBe(grpc.status.CANCELLED);
    await waitFor(() => service.watcherCount === 0, 'the watcher to be removed');
    expect(service.armedTimers).toBe(0);
  });

  it('ends the stream with UNAVAILABLE when the sidecar closes', async () => {
    const { service, address } = await serve();
    const watch = client(address).Watch({});
    watch.on('data', () => {});
    watch.on('error', () => {});
    const status = new Promise<grpc.StatusObject>((resolve) => watch.on('status', resolve));
    await waitFor(() => service.watcherCount === 1, 'the watch');
    service.close();
    expect(await status).toMatchObject({ code: grpc.status.UNAVAILABLE, details: SHUTDOWN_MESSAGE });
    await waitFor(() => service.watcherCount === 0, 'the watcher to be removed');
  });

  it('answers other methods of the service UNIMPLEMENTED and a malformed request INVALID_ARGUMENT, locally', async () => {
    const { port } = await serve();
    const session = h2(port);
    const ask = (path: string, body: Buffer): Promise<Record<string, unknown>> =>
      new Promise((resolve) => {
        const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
        stream.on('response', (headers) => resolve(headers));
        stream.on('error', () => {});
        stream.end(body);
      });
    expect(await ask('/dynamo.sidecar.v1.WorkerLoad/Poll', Buffer.alloc(5))).toMatchObject({ 'grpc-status': String(grpc.status.UNIMPLEMENTED) });
    expect(await ask(WORKER_LOAD_WATCH_PATH, Buffer.from([1, 0, 0, 0, 0]))).toMatchObject({ 'grpc-status': String(grpc.status.INVALID_ARGUMENT) });
    expect(await ask(WORKER_LOAD_WATCH_PATH, Buffer.from([0, 0, 0]))).toMatchObject({ 'grpc-status': String(grpc.status.INVALID_ARGUMENT) });
  });

  it('holds one update for a client that reads nothing, and sends it the latest state (no stale backlog) when it reads again', async () => {
    const { service, tracker, port } = await serve();
    // A receive window of 0: not one DATA byte can reach the client until it opens the window.
    const session = h2(port, { initialWindowSize: 0 });
    const stream = session.request({ ':method': 'POST', ':path': WORKER_LOAD_WATCH_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    stream.on('error', () => {});
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.end(Buffer.from([0, 0, 0, 0, 0]));
    await waitFor(() => service.watcherCount === 1, 'the watch');
    for (let n = 1; n <= 2000; n++) {
      tracker.setAdmission(admission(n % 50));
      service.publishNow();
    }
    tracker.setAdmission(admission(1234));
    service.publishNow(); // skipped too, and no debounced update left pending
    expect(service.stats.updates, 'only the first update was handed to the stream').toBe(1);
    expect(service.stats.skipped, 'the rest skipped, not queued').toBe(2001);
    expect(chunks).toHaveLength(0);

    session.settings({ initialWindowSize: 1 << 20 });
    await waitFor(() => decodeFrames(Buffer.concat(chunks)).length === 2, 'the first update, then the latest state');
    const updates = decodeFrames(Buffer.concat(chunks));
    expect(updates.map((u) => u.ranks[0]!.sequence)).toEqual([1, 2]);
    expect(updates[1]!.ranks[0]!.engine_request).toBe(1234);
    expect(service.stats.updates).toBe(2);
    stream.close(constants.NGHTTP2_CANCEL);
    await waitFor(() => service.watcherCount === 0, 'the watcher to be removed');
  });
});
