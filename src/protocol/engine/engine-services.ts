/**
 * gRPC service constructors (client and `.service` definition) for the engine's .proto files,
 * for whoever speaks gRPC through grpc-js: the simulated engine, the frontend, the load tool.
 */
import * as grpc from '@grpc/grpc-js';
import { HEALTH_SERVICE, VLLM_ENGINE_PROTO, VLLM_ENGINE_SERVICE, definitionOf } from './engine-proto.js';

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

/** Client constructor (and `.service` definition) of vllm.grpc.engine.VllmEngine. */
export function vllmEngineService(): grpc.ServiceClientConstructor {
  engineCtor ??= loadService(VLLM_ENGINE_PROTO, VLLM_ENGINE_SERVICE);
  return engineCtor;
}

/** Client constructor (and `.service` definition) of grpc.health.v1.Health. */
export function healthService(): grpc.ServiceClientConstructor {
  healthCtor ??= loadService('grpc/health/v1/health.proto', HEALTH_SERVICE);
  return healthCtor;
}
