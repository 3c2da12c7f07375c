// GrpcWorkerClients against a real grpc-js VllmEngine server: dp-rank header, one client per address, deadlines, close.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequestMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../../../src/protocol/engine/engine-services.js';
import { GrpcWorkerClients, type CallStatus, type GenerateCall } from '../../../../src/frontend/generate/worker-clients.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { target } from '../../../support/frontend-fakes.js';

let server: grpc.Server;
let address: string;
const seen: { rank: unknown; peer: string; request: GenerateRequestMessage }[] = [];

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(vllmEngineService().service, {
    Generate(call: grpc.ServerWritableStream<GenerateRequestMessage, unknown>) {
      seen.push({ rank: call.metadata.get('x-data-parallel-rank')[0], peer: call.getPeer(), request: call.request });
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

const request = (id: string): GenerateRequestMessage => ({ request_id: id, tokenized: { original_text: '', input_ids: [1, 2] }, stream: true });

describe('GrpcWorkerClients', () => {
  it("sends the target's dp rank as data_parallel_rank and x-data-parallel-rank, and the request as given", async () => {
    const clients = new GrpcWorkerClients();
    try {
      const out = await finish(clients.generate(target('1', address, 3), request('a')));
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
      await finish(clients.generate(target('1', address), request('b')));
      await finish(clients.generate(target('1', address), request('c')));
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
      const out = await finish(clients.generate(target('1', address), request('hold')));
      expect(out.status.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
      expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    } finally {
      clients.close();
    }
  });

  it('reports an unreachable address as UNAVAILABLE', async () => {
    const clients = new GrpcWorkerClients();
    try {
      const out = await finish(clients.generate(target('9', '127.0.0.1:1'), request('d')));
      expect(out.status.code).toBe(GrpcStatus.UNAVAILABLE);
    } finally {
      clients.close();
    }
  });

  it('cancels a call on cancel(), and refuses calls after close()', async () => {
    const clients = new GrpcWorkerClients();
    const call = clients.generate(target('1', address), request('hold'));
    const done = finish(call);
    call.cancel();
    expect((await done).status.code).toBe(GrpcStatus.CANCELLED);
    clients.close();
    expect(() => clients.generate(target('1', address), request('e'))).toThrow('worker clients are closed');
  });
});
