/**
 * A Generate client for each protocol the simulated engine speaks, built with grpc-js from this
 * project's .proto files, for end-to-end tests through a sidecar: one call, its messages collected.
 */
import * as grpc from '@grpc/grpc-js';
import { definitionOf } from '../../src/protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../src/protocol/engine/engine-services.js';
import type { EngineProtocol } from '../../src/tools/engine/options.js';

export interface GenerateCallSpec {
  readonly promptTokens: number;
  readonly maxTokens: number;
  /** Pins a dp rank: the request's field where the protocol has one, else x-data-parallel-rank. */
  readonly rank?: number;
  /** vllm-native: GenerateStream (true) or the unary Generate. */
  readonly stream?: boolean;
}

const ids = (n: number): number[] => Array.from({ length: n }, (_, i) => 100 + i);

function clientFor(
  protocol: EngineProtocol,
  address: string,
): { client: grpc.Client; method: string; request: (spec: GenerateCallSpec) => object; unary: (spec: GenerateCallSpec) => boolean } {
  const credentials = grpc.credentials.createInsecure();
  switch (protocol) {
    case 'smg-vllm':
    case 'vllm-legacy': {
      let service = vllmEngineService().service;
      if (protocol === 'vllm-legacy') {
        const legacy = definitionOf('vllm/legacy/vllm_engine.proto')['vllm.grpc.engine.legacy.GenerateResponse'] as unknown as {
          deserialize(b: Buffer): object;
        };
        service = { ...service, Generate: { ...service['Generate']!, responseDeserialize: (b: Buffer) => legacy.deserialize(b) } };
      }
      const Ctor = grpc.makeClientConstructor(service, 'VllmEngine');
      return {
        client: new Ctor(address, credentials),
        method: 'Generate',
        request: (s) => ({
          request_id: `r${Math.random()}`,
          tokenized: { input_ids: ids(s.promptTokens) },
          sampling_params: { max_tokens: s.maxTokens },
          stream: true,
          ...(s.rank === undefined ? {} : { data_parallel_rank: s.rank }),
        }),
        unary: () => false,
      };
    }
    case 'vllm-native': {
      const Ctor = grpc.makeClientConstructor(definitionOf('vllm/native/inference.proto')['vllm.Inference'] as unknown as grpc.ServiceDefinition, 'Inference');
      return {
        client: new Ctor(address, credentials),
        method: 'GenerateStream',
        request: (s) => ({
          request_id: `r${Math.random()}`,
          token_ids: { ids: ids(s.promptTokens) },
          stopping: { max_new_tokens: s.maxTokens },
          response: { output_token_ids: true },
        }),
        unary: (s) => s.stream === false,
      };
    }
    case 'sglang-native': {
      const Ctor = grpc.makeClientConstructor(
        definitionOf('sglang/runtime/v1/sglang.proto')['sglang.runtime.v1.SglangService'] as unknown as grpc.ServiceDefinition,
        'SglangService',
      );
      return {
        client: new Ctor(address, credentials),
        method: 'Generate',
        request: (s) => ({
          input_ids: ids(s.promptTokens),
          sampling_params: { max_new_tokens: s.maxTokens },
          stream: true,
          rid: `r${Math.random()}`,
          ...(s.rank === undefined ? {} : { routed_dp_rank: s.rank }),
        }),
        unary: () => false,
      };
    }
  }
}

/** One Generate call through `address`; resolves with its messages (rejects with the gRPC error). */
export function generateOnce(protocol: EngineProtocol, address: string, spec: GenerateCallSpec): Promise<unknown[]> {
  const { client, method, request, unary } = clientFor(protocol, address);
  const metadata = new grpc.Metadata();
  if (spec.rank !== undefined && protocol === 'vllm-native') metadata.set('x-data-parallel-rank', String(spec.rank));
  const deadline = Date.now() + 30_000;
  return new Promise<unknown[]>((resolve, reject) => {
    const done = (error: Error | null, messages: unknown[]): void => {
      client.close();
      if (error) reject(error);
      else resolve(messages);
    };
    if (unary(spec)) {
      client.makeUnaryRequest(
        `/vllm.Inference/Generate`,
        (v: object) => serialize(protocol, 'GenerateRequest', v),
        (b: Buffer) => deserialize(protocol, 'GenerateResponse', b),
        request(spec),
        metadata,
        { deadline },
        (error, response) => done(error, response === undefined ? [] : [response]),
      );
      return;
    }
    const messages: unknown[] = [];
    const call = (client as unknown as Record<string, (r: object, m: grpc.Metadata, o: grpc.CallOptions) => grpc.ClientReadableStream<unknown>>)[method]!.call(
      client,
      request(spec),
      metadata,
      { deadline },
    );
    call.on('data', (m: unknown) => messages.push(m));
    call.on('error', (error: Error) => done(error, messages));
    call.on('end', () => done(null, messages));
  });
}

function type(protocol: EngineProtocol, name: string): { serialize(v: object): Buffer; deserialize(b: Buffer): object } {
  if (protocol !== 'vllm-native') throw new Error('only vllm-native has a unary Generate');
  return definitionOf('vllm/native/inference.proto')[`vllm.${name}`] as unknown as { serialize(v: object): Buffer; deserialize(b: Buffer): object };
}
const serialize = (protocol: EngineProtocol, name: string, v: object): Buffer => type(protocol, name).serialize(v);
const deserialize = (protocol: EngineProtocol, name: string, b: Buffer): object => type(protocol, name).deserialize(b);
