/**
 * Back-pressure and resets across the proxy: a client that stops reading stops the engine, and
 * an engine that resets a stream is seen by the client as if it had called the engine directly.
 */
import * as grpc from '@grpc/grpc-js';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { constants, createServer, type Http2Server, type IncomingHttpHeaders } from 'node:http2';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngineClient, unary } from '../../../support/grpc-client.js';
import { rawCall, TEST_ENGINE_PATH } from '../../../support/raw-grpc.js';
import { startSidecarProcess, type SidecarProcess } from '../../../support/sidecar-process.js';
import { LOADER_OPTIONS, TEST_ENGINE_PROTO, startTestEngine, type TestEngine } from '../../../support/test-engine.js';
import { waitFor } from '../../../support/wait.js';

const MiB = 1024 * 1024;

function messageType(name: string): MessageTypeDefinition<object, object> {
  return loadSync(TEST_ENGINE_PROTO, LOADER_OPTIONS)[`dynamo.sidecar.testing.${name}`] as MessageTypeDefinition<object, object>;
}

describe('back-pressure, both ways', () => {
  let engine: TestEngine;
  let sidecar: SidecarProcess;

  beforeAll(async () => {
    engine = await startTestEngine();
    sidecar = await startSidecarProcess(['--upstream', engine.address, '--engine-request-limit', '4']);
  });

  afterAll(async () => {
    await sidecar?.stop();
    await engine?.close();
  });

  it('keeps the sidecar bounded while a fast engine streams 200 MiB to a client that has stopped reading', async () => {
    const rssBefore = await sidecar.metric('process_resident_memory_bytes');
    const { session, stream } = rawCall(
      sidecar.address,
      `${TEST_ENGINE_PATH}/Flood`,
      {},
      messageType('EchoRequest').serialize({ count: 3200, reply_bytes: 65_536 }),
    );
    stream.pause(); // read nothing

    await waitFor(() => engine.floodWritten > 0, 'the engine to start streaming');
    await new Promise((resolve) => setTimeout(resolve, 1500)); // deliberate: time for an engine not held back to write far more
    const writtenWhilePaused = engine.floodWritten;
    const rssPaused = await sidecar.metric('process_resident_memory_bytes');
    // 3,200 messages of 64 KiB were asked for; flow control must have stopped the engine early.
    expect(writtenWhilePaused).toBeLessThan(200);
    expect(rssPaused - rssBefore).toBeLessThan(64 * MiB);

    let received = 0;
    const trailers = new Promise<Record<string, unknown>>((resolve) => stream.on('trailers', (t: IncomingHttpHeaders) => resolve(t)));
    stream.on('data', (chunk: Buffer) => (received += chunk.length));
    stream.resume();
    expect((await trailers)['grpc-status']).toBe('0');
    await new Promise((resolve) => stream.on('close', resolve));
    session.close();
    expect(engine.floodWritten).toBe(3200);
    // Every message arrived: 3,200 x (5-byte prefix + encoded reply of 64 KiB payload and framing).
    expect(received).toBeGreaterThan(3200 * 65_536);
  });

  it('stops a client uploading 200 MiB while the engine is not reading, and delivers everything once it reads', async () => {
    const message = frameMessage(messageType('EchoRequest').serialize({ payload: Buffer.alloc(65_536, 1) }));
    const total = 3200; // x 64 KiB = 200 MiB

    const rssBefore = await sidecar.metric('process_resident_memory_bytes');
    const { session, stream } = rawCall(sidecar.address, `${TEST_ENGINE_PATH}/Sink`);
    let written = 0;
    // Write until the stream pushes back, then wait for 'drain', for as long as it comes.
    const pump = async (limit: number, idleMs: number): Promise<void> => {
      while (written < limit) {
        written++;
        if (!stream.write(message)) {
          const drained = await new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(false), idleMs);
            stream.once('drain', () => (clearTimeout(timer), resolve(true)));
          });
          if (!drained) return;
        }
      }
    };
    await waitFor(() => engine.sinks === 1 || written > 0, 'the call to start');
    await pump(total, 1500);
    const acceptedWhilePaused = written;
    const rssPaused = await sidecar.metric('process_resident_memory_bytes');
    expect(engine.sinks).toBe(1);
    // Flow control stopped the client long before 200 MiB: only windows and buffers were filled.
    expect(acceptedWhilePaused).toBeLessThan(200);
    expect(rssPaused - rssBefore).toBeLessThan(64 * MiB);

    engine.releaseSinks();
    await pump(total, 10_000);
    expect(written).toBe(total);
    stream.end();
    const trailers = new Promise<Record<string, unknown>>((resolve) => stream.on('trailers', (t: IncomingHttpHeaders) => resolve(t)));
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    expect((await trailers)['grpc-status']).toBe('0');
    session.close();
    const reply = messageType('EchoReply').deserialize(Buffer.concat(chunks).subarray(5)) as { index: number };
    expect(reply.index).toBe(total);
  });
});

describe('engine resets', () => {
  let upstream: Http2Server;
  let sidecar: SidecarProcess;
  let address: string;

  beforeAll(async () => {
    // A raw HTTP/2 engine: /Reset/AfterHeaders answers headers then RST_STREAM(CANCEL);
    // /Reset/Refused refuses the stream before any header.
    upstream = createServer();
    upstream.on('stream', (stream, headers) => {
      stream.on('error', () => {});
      if (headers[':path'] === '/Reset/Refused') return stream.close(constants.NGHTTP2_REFUSED_STREAM);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      setTimeout(() => stream.close(constants.NGHTTP2_CANCEL), 50);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    address = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    sidecar = await startSidecarProcess(['--upstream', address, '--engine-request-limit', '2']);
  });

  afterAll(async () => {
    await sidecar?.stop();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  /** Calls `path` via the sidecar and directly; `streaming` keeps the request side open (bidi, no end). */
  async function callBoth(path: string, streaming = false): Promise<[grpc.StatusObject, grpc.StatusObject]> {
    const call = (target: string): Promise<grpc.StatusObject> =>
      new Promise((resolve) => {
        const client = new grpc.Client(target, grpc.credentials.createInsecure());
        const done = (status: grpc.StatusObject): void => {
          client.close();
          resolve(status);
        };
        if (streaming) {
          const stream = client.makeBidiStreamRequest(
            path,
            (x: Buffer) => x,
            (x: Buffer) => x,
          );
          stream.on('error', () => {});
          stream.on('status', done);
          stream.write(Buffer.alloc(0));
        } else {
          client
            .makeUnaryRequest(
              path,
              (x: Buffer) => x,
              (x: Buffer) => x,
              Buffer.alloc(0),
              () => {},
            )
            .on('status', done);
        }
      });
    return Promise.all([call(sidecar.address), call(address)]);
  }

  it('passes an engine RST_STREAM(CANCEL) on to a client still sending as CANCELLED, like a direct call', async () => {
    const [proxied, direct] = await callBoth('/Reset/AfterHeaders', true);
    expect(direct.code).toBe(grpc.status.CANCELLED);
    expect(proxied.code).toBe(direct.code);
  });

  it('passes a reset that comes after the client finished sending on exactly as a direct call sees it', async () => {
    // node:http2 reports such a reset with code 0, which grpc-js turns into INTERNAL; the proxy must not differ.
    const [proxied, direct] = await callBoth('/Reset/AfterHeaders');
    expect(proxied.code).toBe(direct.code);
    expect(proxied.details).toBe(direct.details);
  });

  it('passes a refused stream on as UNAVAILABLE, like a direct call', async () => {
    const [proxied, direct] = await callBoth('/Reset/Refused');
    expect(proxied.code).toBe(direct.code);
    expect(proxied.code).toBe(grpc.status.UNAVAILABLE);
  });

  it('frees the slots of reset calls', async () => {
    await waitFor(async () => (await sidecar.metric('dynamo_engine_request')) === 0, 'slots released');
    expect(await sidecar.metric('dynamo_sidecar_upstream_errors_total', 'kind="reset"')).toBeGreaterThanOrEqual(2);
    // And the sidecar still serves: a new call reaches the engine and gets the engine's answer.
    const client = testEngineClient(sidecar.address);
    const outcome = await unary(client, 'Unary', {});
    client.close();
    expect(outcome.code).toBe(grpc.status.INTERNAL);
    expect(outcome.details).toContain('Call ended without gRPC status');
  });
});
