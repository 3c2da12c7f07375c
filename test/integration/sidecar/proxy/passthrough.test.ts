/**
 * Pass-through conformance: every call kind and every header/trailer the proxy must carry,
 * each compared with the same call made straight to the engine.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngineClient, unary, type TestEngineClient } from '../../../support/grpc-client.js';
import { rawCall, TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { startTestEngine, type EchoReply, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

let engine: TestEngine;
let sidecar: SidecarProcess;
let viaSidecar: TestEngineClient;
let direct: TestEngineClient;

beforeAll(async () => {
  engine = await startTestEngine();
  sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '64']);
  viaSidecar = testEngineClient(sidecar.address);
  direct = testEngineClient(engine.address);
});

afterAll(async () => {
  viaSidecar?.close();
  direct?.close();
  await sidecar?.stop();
  await engine?.close();
});

function collect<T>(call: grpc.ClientReadableStream<T>): Promise<{ messages: T[]; status: grpc.StatusObject }> {
  return new Promise((resolve) => {
    const messages: T[] = [];
    call.on('data', (m: T) => messages.push(m));
    call.on('error', () => {});
    call.on('status', (status: grpc.StatusObject) => resolve({ messages, status }));
  });
}

function both<T>(fn: (client: TestEngineClient) => Promise<T>): Promise<[T, T]> {
  return Promise.all([fn(viaSidecar), fn(direct)]);
}

describe('transparent pass-through', () => {
  it('carries a unary call unchanged', async () => {
    const [proxied, straight] = await both((c) => unary<EchoReply>(c, 'Unary', { payload: Buffer.from('hello'), tag: 't' }));
    expect(proxied.code).toBe(grpc.status.OK);
    expect(proxied.value).toEqual(straight.value);
    expect(proxied.value!.payload.toString()).toBe('hello');
  });

  it('carries a server-streaming call message by message', async () => {
    const [proxied, straight] = await both((c) =>
      collect<EchoReply>((c.ServerStream as (r: object) => grpc.ClientReadableStream<EchoReply>)({ count: 200, reply_bytes: 100 })),
    );
    expect(proxied.status.code).toBe(grpc.status.OK);
    expect(proxied.messages).toHaveLength(200);
    expect(proxied.messages).toEqual(straight.messages);
  });

  it('carries a client-streaming call', async () => {
    const [proxied, straight] = await both(
      (c) =>
        new Promise<EchoReply>((resolve, reject) => {
          const call = (c.ClientStream as (cb: grpc.requestCallback<EchoReply>) => grpc.ClientWritableStream<object>)((err, reply) =>
            err ? reject(err) : resolve(reply!),
          );
          for (let i = 0; i < 50; i++) call.write({ payload: Buffer.from(`part${i};`) });
          call.end();
        }),
    );
    expect(proxied).toEqual(straight);
    expect(proxied.index).toBe(50);
  });

  it('carries a bidi call in lockstep (each reply before the next request)', async () => {
    const pingPong = (c: TestEngineClient): Promise<string[]> =>
      new Promise((resolve, reject) => {
        const call = (c.Bidi as () => grpc.ClientDuplexStream<object, EchoReply>)();
        const seen: string[] = [];
        let i = 0;
        call.on('data', (reply: EchoReply) => {
          seen.push(reply.payload.toString());
          if (++i < 20) call.write({ payload: Buffer.from(`m${i}`) });
          else call.end();
        });
        call.on('error', reject);
        call.on('status', () => resolve(seen));
        call.write({ payload: Buffer.from('m0') });
      });
    const [proxied, straight] = await both(pingPong);
    expect(proxied).toEqual(straight);
    expect(proxied).toHaveLength(20);
  });

  it('passes text and binary metadata both ways, and response headers and trailers', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-request-id', 'abc-123');
    metadata.set('x-blob-bin', Buffer.from([0, 1, 2, 255]));
    const [proxied, straight] = await both((c) => unary<EchoReply>(c, 'EchoMetadata', {}, { metadata: metadata.clone() }));
    expect(proxied.metadata!.get('x-request-id')).toEqual(['abc-123']);
    expect(proxied.metadata!.get('x-blob-bin')).toEqual([Buffer.from([0, 1, 2, 255])]);
    expect(proxied.trailers!.get('x-request-id-trailer')).toEqual(['abc-123']);
    expect(proxied.trailers!.get('x-blob-trailer-bin')).toEqual(straight.trailers!.get('x-blob-trailer-bin'));
  });

  it('forwards grpc-timeout, less the time already spent', async () => {
    const outcome = await unary<EchoReply>(viaSidecar, 'EchoMetadata', {}, { deadlineMs: 5000 });
    const seenByEngine = Number(outcome.value!.payload.toString());
    expect(seenByEngine).toBeGreaterThan(3500);
    expect(seenByEngine).toBeLessThanOrEqual(5000);
  });

  it('passes error status, percent-encoded unicode message, details and trailers unchanged', async () => {
    const request = {
      code: grpc.status.FAILED_PRECONDITION,
      message: 'kv cache full: ünïcödé ☃ 100%',
      details: Buffer.from('opaque-status-details'),
      trailers: { 'x-reason': 'blocks', 'x-extra-bin': 'binary!' },
    };
    const [proxied, straight] = await both((c) => unary(c, 'Fail', request));
    expect(proxied.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(proxied.details).toBe('kv cache full: ünïcödé ☃ 100%');
    expect(proxied.details).toBe(straight.details);
    expect(proxied.trailers!.get('x-reason')).toEqual(['blocks']);
    expect(proxied.trailers!.get('grpc-status-details-bin')).toEqual(straight.trailers!.get('grpc-status-details-bin'));
    expect(proxied.trailers!.get('x-extra-bin')).toEqual(straight.trailers!.get('x-extra-bin'));
  });

  it('passes an error that ends a stream after some messages', async () => {
    const [proxied, straight] = await both((c) =>
      collect(
        (c.FailStream as (r: object) => grpc.ClientReadableStream<EchoReply>)({ code: grpc.status.ABORTED, message: 'engine aborted', replies_before: 3 }),
      ),
    );
    expect(proxied.messages).toHaveLength(3);
    expect(proxied.status.code).toBe(grpc.status.ABORTED);
    expect(proxied.status.details).toBe(straight.status.details);
  });

  it('carries a 64 MiB message each way', async () => {
    const payload = Buffer.alloc(64 * 1024 * 1024, 7);
    payload[payload.length - 1] = 9;
    const outcome = await unary<EchoReply>(viaSidecar, 'Unary', { payload });
    expect(outcome.code).toBe(grpc.status.OK);
    expect(outcome.value!.payload.length).toBe(payload.length);
    expect(outcome.value!.payload.equals(payload)).toBe(true);
  });

  it('resets the engine stream when the client cancels, and frees the slot', async () => {
    let call: grpc.ClientUnaryCall | undefined;
    const pending = unary(viaSidecar, 'Hold', { tag: 'cancel-me' }, { onCall: (c) => (call = c) });
    await waitFor(() => engine.held === 1, 'the engine to hold the call');
    call!.cancel();
    expect((await pending).code).toBe(grpc.status.CANCELLED);
    await waitFor(() => engine.held === 0 && engine.active === 0, 'the engine to see the cancel');
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 0, 'the slot to be released');
  });

  it.each([
    [{ 'content-type': 'application/grpc', 'grpc-timeout': '1.5S' }, 'invalid grpc-timeout header "1.5S"'],
    [{ 'content-type': 'text/plain' }, 'content-type must be application/grpc, got "text/plain"'],
  ])('answers %j with INVALID_ARGUMENT naming the header, without reaching the engine', async (headers, message) => {
    const arrivals = engine.arrivals.length;
    const { session, stream } = rawCall(sidecar.address, `${TEST_ENGINE_PATH}/Hold`, headers, new Uint8Array(0));
    try {
      const response = await new Promise<Record<string, unknown>>((resolve) => stream.on('response', resolve));
      expect(response['grpc-status']).toBe(String(grpc.status.INVALID_ARGUMENT));
      expect(response['grpc-message']).toBe(message);
    } finally {
      session.close();
    }
    expect(engine.arrivals.length).toBe(arrivals);
  });

  it('does not speak HTTP/1.1 on the ingress port (gRPC is HTTP/2 only)', async () => {
    const res = await fetch(`http://${sidecar.address}/`, { signal: AbortSignal.timeout(5000) }).catch((err: Error) => err);
    // HTTP/1.1 is not spoken on the ingress at all; the connection is refused at protocol level.
    expect(res).toBeInstanceOf(Error);
  });
});
