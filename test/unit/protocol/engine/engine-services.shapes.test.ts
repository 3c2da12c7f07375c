/**
 * The gRPC service constructors built from the repo's .proto files (engine-services.test.ts has
 * Generate's pre-encoded prompt bytes): every RPC the engine,
 * the frontend and the load tool call, at its wire path and with its streaming shape, built
 * once per process, and serializing with the same message definitions the sidecar decodes.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { vllmEngineMessage, type GenerateRequestMessage } from '../../../../src/protocol/engine/engine-proto.js';
import { healthService, vllmEngineService } from '../../../../src/protocol/engine/engine-services.js';

const shape = (ctor: ReturnType<typeof vllmEngineService>) =>
  Object.fromEntries(
    Object.entries(ctor.service).map(([name, m]) => [name, { path: m.path, requestStream: m.requestStream, responseStream: m.responseStream }]),
  );

afterEach(() => {
  vi.doUnmock('@grpc/grpc-js');
  vi.resetModules();
});

describe('vllmEngineService', () => {
  it('has every RPC of vllm.grpc.engine.VllmEngine at its path; only Generate streams, server-side', () => {
    const unary = (name: string) => ({ path: `/vllm.grpc.engine.VllmEngine/${name}`, requestStream: false, responseStream: false });
    expect(shape(vllmEngineService())).toEqual({
      Generate: { path: '/vllm.grpc.engine.VllmEngine/Generate', requestStream: false, responseStream: true },
      HealthCheck: unary('HealthCheck'),
      Abort: unary('Abort'),
      GetModelInfo: unary('GetModelInfo'),
      GetServerInfo: unary('GetServerInfo'),
      GetLoads: unary('GetLoads'),
    });
  });

  it('is built once: every caller gets the same constructor', () => {
    expect(vllmEngineService()).toBe(vllmEngineService());
    expect(typeof vllmEngineService()).toBe('function');
  });

  it('serializes a Generate request byte for byte as the message definition does, and back', () => {
    const request: GenerateRequestMessage = {
      request_id: 'r1',
      tokenized: { input_ids: [1, 2, 3] },
      sampling_params: { max_tokens: 4 },
      stream: true,
      data_parallel_rank: 0,
    };
    const generate = vllmEngineService().service['Generate']!;
    const wire = generate.requestSerialize(request);
    expect(wire).toEqual(vllmEngineMessage('GenerateRequest').serialize(request));
    expect(generate.requestDeserialize(wire)).toMatchObject({ request_id: 'r1', input: 'tokenized', data_parallel_rank: 0 });
  });
});

describe('healthService', () => {
  it('has Check and List (unary) and Watch (server streaming) of grpc.health.v1.Health', () => {
    expect(shape(healthService())).toEqual({
      Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false },
      List: { path: '/grpc.health.v1.Health/List', requestStream: false, responseStream: false },
      Watch: { path: '/grpc.health.v1.Health/Watch', requestStream: false, responseStream: true },
    });
    expect(healthService()).toBe(healthService());
    expect(healthService()).not.toBe(vllmEngineService());
  });

  it('reads the serving status as its enum name', () => {
    const check = healthService().service['Check']!;
    // HealthCheckResponse { status = 1 }: SERVING is 1.
    expect(check.responseDeserialize(Buffer.from([0x08, 0x01]))).toEqual({ status: 'SERVING' });
    expect(check.responseDeserialize(Buffer.from([0x08, 0x02]))).toEqual({ status: 'NOT_SERVING' });
  });
});

describe('a service missing from its definition', () => {
  it('is an error naming the service and the file', async () => {
    vi.resetModules();
    vi.doMock('@grpc/grpc-js', async (importOriginal) => {
      const real = await importOriginal<typeof import('@grpc/grpc-js')>();
      // The package is there, the service is not (a .proto that renamed it).
      return { ...real, loadPackageDefinition: () => ({ vllm: { grpc: { engine: {} } }, grpc: { health: { v1: {} } } }) };
    });
    const fresh = await import('../../../../src/protocol/engine/engine-services.js');
    expect(() => fresh.healthService()).toThrow('service grpc.health.v1.Health not found in grpc/health/v1/health.proto');
  });

  it('is the same error when a package on the way is missing too', async () => {
    vi.resetModules();
    vi.doMock('@grpc/grpc-js', async (importOriginal) => ({ ...(await importOriginal<typeof import('@grpc/grpc-js')>()), loadPackageDefinition: () => ({}) }));
    const fresh = await import('../../../../src/protocol/engine/engine-services.js');
    expect(() => fresh.healthService()).toThrow('service grpc.health.v1.Health not found in grpc/health/v1/health.proto');
  });
});
