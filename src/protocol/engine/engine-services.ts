/**
 * gRPC service constructors (client and `.service` definition) for the engine's .proto files,
 * for whoever speaks gRPC through grpc-js: the simulated engine, the frontend, the load tool.
 */
import * as grpc from '@grpc/grpc-js';
import { HEALTH_SERVICE, VLLM_ENGINE_PROTO, VLLM_ENGINE_SERVICE, definitionOf, type GenerateRequestMessage } from './engine-proto.js';

function loadService(file: string, fullName: string): grpc.ServiceClientConstructor {
  const definition = definitionOf(file);
  let node: unknown = grpc.loadPackageDefinition(definition);
  // A package missing from the file (a renamed .proto) ends the walk as a missing service does.
  for (const part of fullName.split('.')) node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[part] : undefined;
  if (typeof node !== 'function') throw new Error(`service ${fullName} not found in ${file}`);
  return node as grpc.ServiceClientConstructor;
}

let engineCtor: grpc.ServiceClientConstructor | undefined;
let healthCtor: grpc.ServiceClientConstructor | undefined;

/**
 * Client constructor (and `.service` definition) of vllm.grpc.engine.VllmEngine. Its Generate
 * requests may carry `tokenized_bytes` (GenerateRequestMessage).
 */
export function vllmEngineService(): grpc.ServiceClientConstructor {
  if (engineCtor === undefined) {
    const service = (definitionOf(VLLM_ENGINE_PROTO)[VLLM_ENGINE_SERVICE] ?? {}) as grpc.ServiceDefinition;
    const generate = service['Generate'] as grpc.MethodDefinition<GenerateRequestMessage, unknown> | undefined;
    if (generate === undefined) throw new Error(`service ${VLLM_ENGINE_SERVICE} has no Generate in ${VLLM_ENGINE_PROTO}`);
    const withBytes = { ...service, Generate: { ...generate, requestSerialize: withTokenizedBytes(generate.requestSerialize) } };
    engineCtor = grpc.makeClientConstructor(withBytes, VLLM_ENGINE_SERVICE.split('.').pop()!);
  }
  return engineCtor;
}

/**
 * A Generate serializer that writes a pre-encoded `tokenized` field after the other fields
 * (protobuf decoders take fields in any order): the other fields go through proto-loader, the
 * prompt's bytes are copied once into the message and never become a JavaScript array.
 */
function withTokenizedBytes(serialize: (request: GenerateRequestMessage) => Buffer): (request: GenerateRequestMessage) => Buffer {
  return (request) => {
    const { tokenized_bytes: bytes, ...rest } = request;
    if (bytes === undefined) return serialize(request);
    const head = serialize(rest);
    const message = Buffer.allocUnsafe(head.length + bytes.length);
    head.copy(message, 0);
    message.set(bytes, head.length);
    return message;
  };
}

/** Client constructor (and `.service` definition) of grpc.health.v1.Health. */
export function healthService(): grpc.ServiceClientConstructor {
  healthCtor ??= loadService('grpc/health/v1/health.proto', HEALTH_SERVICE);
  return healthCtor;
}
