// GrpcWorkerClients against a real grpc-js VllmEngine server: dp-rank header, one client per address, deadlines, close; and against a bare HTTP/2 server that closes gracefully.
import * as grpc from '@grpc/grpc-js';
import { constants, createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequestMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../../../src/protocol/engine/engine-services.js';
import { GrpcWorkerClients, type CallClass, type CallStatus, type GenerateCall } from '../../../../src/frontend/generate/worker-clients.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { target } from '../../../support/frontend-fakes.js';
import { waitFor } from '../../../support/wait.js';

let server: grpc.Server;
let address: string;
const seen: { rank: unknown; priority: unknown[]; tenant: unknown[]; peer: string; request: GenerateRequestMessage }[] = [];

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(vllmEngineService().service, {
    Generate(call: grpc.ServerWritableStream<GenerateRequestMessage, unknown>) {
      seen.push({
        rank: call.metadata.get('x-data-parallel-rank')[0],
        priority: call.metadata.get('x-request-priority'),
        tenant: call.metadata.get('x-tenant-id'),
        peer: call.getPeer(),
        request: call.request,
      });
      if (call.request.request_id === 'hold') return; // never answers
      call.write({ complete: { output_ids: [1], finish_reason: 'stop' } });
      call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
});

afterAll(() => {
  server?.forceShutdown();
});

function finish(call: GenerateCall): Promise<{ messages: unknown[]; status: CallStatus }> {
  const messages: unknown[] = [];
  call.on('data', (m) => messages.push(m));
  return new Promise((resolve) => call.on('status', (status) => resolve({ messages, status })));
}

const ANONYMOUS: CallClass = { priority: 0 };

const request = (id: string): GenerateRequestMessage => ({ request_id: id, tokenized: { original_text: '', input_ids: [1, 2] }, stream: true });

describe('GrpcWorkerClients', () => {
  it('sends the priority as x-request-priority always, and the tenant as x-tenant-id only when there is one', async () => {
    const clients = new GrpcWorkerClients();
    try {
      await finish(clients.generate(target('1', address), request('classed'), { priority: -7, tenant: 'team-a' }));
      await finish(clients.generate(target('1', address), request('anonymous'), ANONYMOUS));
      const byId = (id: string) => seen.find((s) => s.request.request_id === id)!;
      expect(byId('classed')).toMatchObject({ priority: ['-7'], tenant: ['team-a'] });
      expect(byId('anonymous')).toMatchObject({ priority: ['0'], tenant: [] });
    } finally {
      clients.close();
    }
  });

  it("sends the target's dp rank as data_parallel_rank and x-data-parallel-rank, and the request as given", async () => {
    const clients = new GrpcWorkerClients();
    try {
      const out = await finish(clients.generate(target('1', address, 3), request('a'), ANONYMOUS));
      expect(out.status.code).toBe(GrpcStatus.OK);
      expect(out.messages).toHaveLength(1);
      expect(seen.at(-1)).toMatchObject({ rank: '3', request: { request_id: 'a', tokenized: { input_ids: [1, 2] }, data_parallel_rank: 3 } });
    } finally {
      clients.close();
    }
  });

  it('keeps one client per address across calls', async () => {
    const clients = new GrpcWorkerClients();
    try {
      await finish(clients.generate(target('1', address), request('b'), ANONYMOUS));
      await finish(clients.generate(target('1', address), request('c'), ANONYMOUS));
      // One client = one HTTP/2 connection: the server sees both calls from the same client port.
      const peers = seen.filter((s) => ['b', 'c'].includes(s.request.request_id)).map((s) => s.peer);
      expect(peers).toHaveLength(2);
      expect(peers[1]).toBe(peers[0]);
    } finally {
      clients.close();
    }
  });

  it('ends a call with DEADLINE_EXCEEDED after the configured deadline', async () => {
    const clients = new GrpcWorkerClients({ requestDeadlineMs: 100 });
    try {
      const started = Date.now();
      const out = await finish(clients.generate(target('1', address), request('hold'), ANONYMOUS));
      expect(out.status.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
      expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    } finally {
      clients.close();
    }
  });

  it('reports an unreachable address as UNAVAILABLE', async () => {
    const clients = new GrpcWorkerClients();
    try {
      const out = await finish(clients.generate(target('9', '127.0.0.1:1'), request('d'), ANONYMOUS));
      expect(out.status.code).toBe(GrpcStatus.UNAVAILABLE);
    } finally {
      clients.close();
    }
  });

  it('cancels a call on cancel(), and refuses calls after close()', async () => {
    const clients = new GrpcWorkerClients();
    const call = clients.generate(target('1', address), request('hold'), ANONYMOUS);
    const done = finish(call);
    call.cancel();
    expect((await done).status.code).toBe(GrpcStatus.CANCELLED);
    clients.close();
    expect(() => clients.generate(target('1', address), request('e'), ANONYMOUS)).toThrow('worker clients are closed');
  });
});

describe('GrpcWorkerClients when a worker closes the connection gracefully (GOAWAY NO_ERROR)', () => {
  let raw: Http2Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => (raw ? raw.close(resolve) : resolve(undefined)));
    raw = undefined;
  });

  it('lets the calls below the last-stream-id finish, and retries a refused one on a new connection', async () => {
    // A bare HTTP/2 stand-in for a sidecar: the first call on a connection is held; the second
    // makes it send GOAWAY(NO_ERROR, last stream = the first), so the second is refused; later
    // connections answer at once. Answers are Trailers-Only OK (no message).
    const connections: number[] = [];
    const held: ServerHttp2Stream[] = [];
    raw = createServer();
    raw.on('session', (session) => {
      connections.push(connections.length);
      session.on('error', () => {});
    });
    raw.on('stream', (stream) => {
      stream.on('error', () => {});
      const connection = connections.length - 1;
      const first = held.length === 0;
      if (connection === 0 && first) return void held.push(stream);
      if (connection === 0) return void stream.session!.goaway(constants.NGHTTP2_NO_ERROR, held[0]!.id);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
    });
    const port = await new Promise<number>((resolve) => raw!.listen(0, '127.0.0.1', () => resolve((raw!.address() as AddressInfo).port)));
    const clients = new GrpcWorkerClients();
    try {
      const where = target('1', `127.0.0.1:${port}`);
      const firstCall = finish(clients.generate(where, request('first'), ANONYMOUS));
      await waitFor(() => held.length === 1, 'the first call to be held');
      const second = await finish(clients.generate(where, request('second'), ANONYMOUS));
      expect(second.status.code, second.status.details).toBe(GrpcStatus.OK);
      expect(connections.length, 'the retry went to a new connection').toBe(2);
      held[0]!.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
      const first = await firstCall;
      expect(first.status.code, `the call below the last-stream-id: ${first.status.details}`).toBe(GrpcStatus.OK);
    } finally {
      clients.close();
    }
  });
});
