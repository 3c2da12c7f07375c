// The engine's gRPC service for grpc-js: a Generate request may carry its prompt as pre-encoded bytes, which the engine decodes as tokenized.input_ids.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequestMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../../../src/protocol/engine/engine-services.js';
import { encodeTokenizedInput } from '../../../../src/protocol/engine/tokenized-input.js';

let server: grpc.Server;
let client: grpc.Client;
const received: GenerateRequestMessage[] = [];

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(vllmEngineService().service, {
    Generate: (call: grpc.ServerWritableStream<GenerateRequestMessage, object>) => {
      received.push(call.request);
      call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const Ctor = vllmEngineService();
  client = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
});
afterAll(() => {
  client?.close();
  server?.forceShutdown();
});

function generate(request: GenerateRequestMessage): Promise<void> {
  const call = (client as unknown as { Generate(r: GenerateRequestMessage): grpc.ClientReadableStream<unknown> }).Generate(request);
  return new Promise((resolve, reject) => {
    call.on('data', () => {});
    call.on('status', (status: grpc.StatusObject) => (status.code === grpc.status.OK ? resolve() : reject(new Error(status.details))));
    call.on('error', () => {});
  });
}

describe('vllmEngineService Generate', () => {
  it('sends tokenized_bytes as the tokenized field, beside the fields given as objects', async () => {
    const ids = [5, 300, 70_000];
    await generate({
      request_id: 'r1',
      tokenized_bytes: encodeTokenizedInput(ids, 1024)!,
      sampling_params: { max_tokens: 7 },
      stream: true,
      data_parallel_rank: 1,
    });
    expect(received.at(-1)).toMatchObject({
      request_id: 'r1',
      input: 'tokenized',
      tokenized: { original_text: '', input_ids: ids },
      sampling_params: { max_tokens: 7 },
      stream: true,
      data_parallel_rank: 1,
    });
  });

  it('still serializes a request given wholly as an object', async () => {
    await generate({ request_id: 'r2', tokenized: { original_text: 'x', input_ids: [1, 2] }, stream: false });
    expect(received.at(-1)).toMatchObject({ request_id: 'r2', tokenized: { original_text: 'x', input_ids: [1, 2] }, stream: false });
  });
});
