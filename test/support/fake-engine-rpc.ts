/**
 * An in-process HTTP/2 server that answers one unary gRPC path, for the engine questions
 * (EngineQuestion and its probes): each call's answer comes from `answer(n)` (1-based): a
 * message body, a status (Trailers-Only), or 'hang' (never answers). Paths in `others` always get
 * their one answer (not counted in `calls`); any other path gets HTTP 404.
 */
import { createServer, type ServerHttp2Session } from 'node:http2';
import { frameMessage } from '../../src/protocol/grpc/framing.js';

export type RpcAnswer = { body: Uint8Array } | { status: number; message?: string } | 'hang';

export interface FakeEngineRpc {
  readonly port: number;
  /** Calls of the path seen so far, open right now, most open at once. */
  readonly calls: number;
  readonly open: number;
  readonly maxOpen: number;
  /** Calls closed without an answer (cancelled by the client). */
  readonly cancelled: number;
  /** Paths of every stream, to check nothing else was asked. */
  readonly paths: string[];
  close(): Promise<void>;
}

/** `port` 0 picks a free one; a given port lets a test start the engine late where a client already dials. */
export async function startFakeEngineRpc(
  path: string,
  answer: (n: number) => RpcAnswer,
  port = 0,
  others: Readonly<Record<string, RpcAnswer>> = {},
): Promise<FakeEngineRpc> {
  const server = createServer();
  const state = { calls: 0, open: 0, maxOpen: 0, cancelled: 0, paths: [] as string[] };
  const sessions = new Set<ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('error', () => {});
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    state.paths.push(String(headers[':path']));
    const other = others[String(headers[':path'])];
    if (headers[':path'] !== path && other === undefined) return void stream.respond({ ':status': 404 }, { endStream: true });
    const n = other === undefined ? ++state.calls : 0;
    state.open++;
    state.maxOpen = Math.max(state.maxOpen, state.open);
    let answered = false;
    stream.on('close', () => {
      state.open--;
      if (!answered) state.cancelled++;
    });
    stream.resume();
    stream.on('end', () => {
      const a = other ?? answer(n);
      if (a === 'hang') return;
      answered = true;
      if ('status' in a) {
        stream.respond(
          { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(a.status), 'grpc-message': a.message ?? '' },
          { endStream: true },
        );
        return;
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(frameMessage(a.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    get calls() {
      return state.calls;
    },
    get open() {
      return state.open;
    },
    get maxOpen() {
      return state.maxOpen;
    },
    get cancelled() {
      return state.cancelled;
    },
    paths: state.paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.destroy();
      }),
  };
}
