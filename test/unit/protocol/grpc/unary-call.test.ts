/** unaryCall against an in-process HTTP/2 server: every way a call can end is a status, never a throw. */
import { connect, createServer, type ClientHttp2Session, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frameMessage } from '../../../../src/protocol/grpc/framing.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { unaryCall, type OpenStream } from '../../../../src/protocol/grpc/unary-call.js';
import { waitFor } from '../../../support/wait.js';

let server: Http2Server;
let client: ClientHttp2Session;
const sessions = new Set<ServerHttp2Session>();
let open: OpenStream;
const seen: { path: string; body: Buffer; timeout: string | undefined; closed: boolean }[] = [];

beforeAll(async () => {
  server = createServer();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('error', () => {});
  });
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    stream.on('error', () => {});
    const record = { path: String(headers[':path']), body: Buffer.alloc(0), timeout: headers['grpc-timeout'] as string | undefined, closed: false };
    seen.push(record);
    stream.on('close', () => (record.closed = true));
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      record.body = Buffer.concat(chunks);
      switch (record.path) {
        case '/t.S/Ok':
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
          stream.end(frameMessage(Buffer.from('answer')));
          return;
        case '/t.S/Busy':
          stream.respond(
            { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'model still loading 100%25' },
            { endStream: true },
          );
          return;
        case '/t.S/NotGrpc':
          stream.respond({ ':status': 404 }, { endStream: true });
          return;
        case '/t.S/Hang':
          return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  client = connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  client.on('error', () => {});
  open = (headers) => client.request(headers);
});

afterAll(async () => {
  client.destroy();
  for (const session of sessions) session.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('unaryCall', () => {
  it('sends one framed request with a grpc-timeout and returns the answer of an OK call', async () => {
    const outcome = await unaryCall(open, '/t.S/Ok', Buffer.from('question'), { timeoutMs: 5000 });
    expect(outcome).toMatchObject({ status: GrpcStatus.OK });
    expect(outcome.body?.toString()).toBe('answer');
    const request = seen.find((s) => s.path === '/t.S/Ok')!;
    expect(request.body).toEqual(frameMessage(Buffer.from('question')));
    expect(request.timeout).toBe('5000m');
  });

  it('reads a Trailers-Only status and decodes its message', async () => {
    expect(await unaryCall(open, '/t.S/Busy', new Uint8Array(0), { timeoutMs: 5000 })).toEqual({
      status: GrpcStatus.UNAVAILABLE,
      message: 'model still loading 100%',
    });
  });

  it('names the HTTP status of a server that is not gRPC', async () => {
    const outcome = await unaryCall(open, '/t.S/NotGrpc', new Uint8Array(0), { timeoutMs: 5000 });
    expect(outcome.status).toBe(GrpcStatus.UNAVAILABLE);
    expect(outcome.message).toMatch(/HTTP 404 without a grpc-status/);
  });

  it('gives up after the timeout and on abort, cancelling the stream at the server', async () => {
    const before = seen.length;
    expect(await unaryCall(open, '/t.S/Hang', new Uint8Array(0), { timeoutMs: 50 })).toEqual({
      status: GrpcStatus.DEADLINE_EXCEEDED,
      message: 'no answer within 50 ms',
    });
    const controller = new AbortController();
    const aborted = unaryCall(open, '/t.S/Hang', new Uint8Array(0), { timeoutMs: 60_000, signal: controller.signal });
    await waitFor(() => seen.length === before + 2, 'the second call at the server', 5000);
    controller.abort();
    expect(await aborted).toEqual({ status: GrpcStatus.CANCELLED, message: 'cancelled' });
    const hung = seen.slice(before);
    expect(hung).toHaveLength(2);
    await waitFor(() => hung.every((s) => s.closed), 'both streams cancelled at the server', 5000);
  });

  it('turns a stream that cannot be opened into UNAVAILABLE', async () => {
    const failing: OpenStream = () => {
      throw new Error('upstream pool closed');
    };
    expect(await unaryCall(failing, '/t.S/Ok', new Uint8Array(0), { timeoutMs: 10 })).toEqual({
      status: GrpcStatus.UNAVAILABLE,
      message: 'cannot open a stream: upstream pool closed',
    });
  });
});
