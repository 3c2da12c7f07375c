/**
 * The engine's messages as proto-loader gives them: snake_case names as on the wire, defaults
 * filled in, the oneof case named, a proto3 `optional` that is unset left unset (the engine then
 * picks), each .proto parsed once, and an unknown message name an error naming the file. Bytes
 * are written by hand from the upstream field numbers (proto-bytes.ts), not by our own .proto.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import {
  definitionOf,
  HEALTH_SERVICE,
  VLLM_ENGINE_PROTO,
  VLLM_ENGINE_SERVICE,
  vllmEngineMessage,
  type GenerateRequestMessage,
  type GenerateResponseMessage,
  type GetLoadsResponseMessage,
} from '../../../../src/protocol/engine/engine-proto.js';
import { decodeGenerateRequest } from '../../../../src/protocol/engine/generate-wire.js';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { bytes, GET_LOADS_SGLANG, GET_LOADS_VLLM, msg, num, packed, str } from '../../../support/proto-bytes.js';

describe('definitionOf', () => {
  it('finds a file by its path under proto/, not under the working directory', () => {
    expect(existsSync(join(process.cwd(), VLLM_ENGINE_PROTO))).toBe(false);
    expect(Object.keys(definitionOf(VLLM_ENGINE_PROTO))).toContain(VLLM_ENGINE_SERVICE);
    expect(existsSync(join(PROTO_DIR, VLLM_ENGINE_PROTO))).toBe(true);
  });

  it('parses each file once: the same definition for every caller', () => {
    expect(definitionOf(VLLM_ENGINE_PROTO)).toBe(definitionOf(VLLM_ENGINE_PROTO));
    const health = definitionOf('grpc/health/v1/health.proto');
    expect(health).not.toBe(definitionOf(VLLM_ENGINE_PROTO));
    expect(Object.keys(health)).toContain(HEALTH_SERVICE);
  });

  it('throws for a file that is not there, and keeps throwing (nothing cached)', () => {
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {}); // proto-loader warns before it throws
    try {
      expect(() => definitionOf('vllm/no_such.proto')).toThrow();
      expect(() => definitionOf('vllm/no_such.proto')).toThrow();
      expect(warnings).toHaveBeenCalled();
    } finally {
      warnings.mockRestore();
    }
  });
});

describe('vllmEngineMessage', () => {
  it('decodes GetLoadsResponse as vLLM sends it: snake_case fields, absent ones at their default', () => {
    const response = vllmEngineMessage<GetLoadsResponseMessage>('GetLoadsResponse').deserialize(GET_LOADS_VLLM);
    expect(response).toEqual({
      timestamp: '2026-12-02T10:00:00Z',
      version: '0.11.0',
      dp_rank_count: 1,
      loads: [
        {
          dp_rank: 0,
          num_running_reqs: 5,
          num_waiting_reqs: 2,
          num_total_reqs: 7,
          num_used_tokens: 0,
          max_total_num_tokens: 0,
          token_usage: 0.25,
          gen_throughput: 0,
          cache_hit_rate: 0,
          utilization: 0,
          max_running_requests: 0,
        },
      ],
    });
  });

  it("decodes SGLang's GetLoadsResponse, skipping the fields our .proto leaves out", () => {
    const response = vllmEngineMessage<GetLoadsResponseMessage>('GetLoadsResponse').deserialize(GET_LOADS_SGLANG);
    expect(response.dp_rank_count).toBe(2);
    expect(response.loads.map((l) => [l.dp_rank, l.num_used_tokens, l.max_total_num_tokens, l.max_running_requests])).toEqual([
      [0, 4096, 65536, 256],
      [1, 1000, 65536, 256],
    ]);
    expect(Object.keys(response).sort()).toEqual(['dp_rank_count', 'loads', 'timestamp', 'version']);
  });

  it('names the oneof case that is set', () => {
    const type = vllmEngineMessage<GenerateResponseMessage>('GenerateResponse');
    const chunk = type.deserialize(msg(bytes(1, [...packed(1, [7, 8]), ...num(3, 2)])));
    expect(chunk).toMatchObject({ response: 'chunk', chunk: { token_ids: [7, 8], completion_tokens: 2 } });
    expect(chunk.complete).toBeUndefined();
    const complete = type.deserialize(msg(bytes(2, [...packed(1, [7, 8, 9]), ...str(2, 'length')])));
    expect(complete).toMatchObject({ response: 'complete', complete: { output_ids: [7, 8, 9], finish_reason: 'length' } });
  });

  it('writes an optional rank of 0 (a pin to rank 0) and leaves an unset one off the wire', () => {
    const type = vllmEngineMessage<GenerateRequestMessage>('GenerateRequest');
    const base = { request_id: 'r', stream: false, tokenized: { input_ids: [1, 2] } };
    const rank0 = type.serialize({ ...base, data_parallel_rank: 0 });
    expect([...rank0.subarray(-2)]).toEqual(num(9, 0));
    expect(type.deserialize(rank0).data_parallel_rank).toBe(0);
    const unset = type.serialize(base);
    expect(rank0.length).toBe(unset.length + 2);
    expect(type.serialize({ ...base, data_parallel_rank: null })).toEqual(unset);
    expect(type.deserialize(unset).data_parallel_rank).toBeUndefined();
  });

  it("writes a GenerateRequest that the sidecar's own wire decoder reads the same way", () => {
    const wire = vllmEngineMessage<GenerateRequestMessage>('GenerateRequest').serialize({
      request_id: 'req-9',
      tokenized: { input_ids: [5, 6, 7, 300_000] },
      sampling_params: { max_tokens: 12 },
      stream: true,
      data_parallel_rank: 1,
    });
    expect(decodeGenerateRequest(wire, 'vllm')).toEqual({ promptTokens: 4, maxTokens: 12, promptEstimated: false, dataParallelRank: 1 });
  });

  it('refuses a name that is no message of the file, and a service name', () => {
    expect(() => vllmEngineMessage('NoSuchMessage')).toThrow('message vllm.grpc.engine.NoSuchMessage not found in vllm/vllm_engine.proto');
    expect(() => vllmEngineMessage('VllmEngine')).toThrow('message vllm.grpc.engine.VllmEngine not found in vllm/vllm_engine.proto');
  });
});
