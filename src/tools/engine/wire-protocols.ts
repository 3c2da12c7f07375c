/**
 * The gRPC protocols the simulated engine speaks (--protocol), each mapped onto the one
 * EngineCore: its services and handlers, how its Generate request reads as the core's request,
 * and how the core's output (SMG's vLLM shape: chunk per step, then a complete) is written in its
 * response layout. Field facts: docs/wire-facts.md; the .proto files under proto/ are hand-written
 * subsets of each upstream revision.
 *
 *   smg-vllm       vllm.grpc.engine.VllmEngine as SMG serves it: the core's messages as they are.
 *   vllm-legacy    the same service; responses carry request_id 1 and chunk 2 / complete 3, with
 *                  completion_tokens the running total and a complete holding every output id.
 *   vllm-native    vllm.Inference (Generate: one response; GenerateStream) and vllm.Control: a
 *                  stream's first message is prompt_info, then deltas (num_tokens, token_ids when
 *                  asked for), the last one with finish_info (num_output_tokens: the total).
 *   sglang-native  sglang.runtime.v1.SglangService: output_ids all so far (SGLang's default) or
 *                  deltas (--sglang-output incremental), meta_info as JSON text, finished on the last.
 *
 * Where a protocol puts the last tokens and the finish in one message (vllm-native, sglang-native)
 * and the core sends a chunk and then, in the same tick, a complete, the chunk is held until the
 * microtask queue runs: merged when the complete follows at once, sent alone otherwise. No
 * token waits for a later step.
 */
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { definitionOf, VLLM_ENGINE_SERVICE, type GenerateRequestMessage, type GenerateResponseMessage } from '../../protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../protocol/engine/engine-services.js';
import type { GrpcStatus } from '../../protocol/grpc/status.js';
import type { GenerateSink } from './engine-core.js';
import type { EngineProtocol, SglangOutput } from './options.js';

/** What a protocol's handlers need of the server. */
export interface ProtocolHost {
  readonly sglangOutput: SglangOutput;
  /** Runs a Generate call: `request` in the core's shape, its output through `sink`; cancels with the call. */
  generate(
    call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>,
    request: GenerateRequestMessage,
    sink: GenerateSink,
  ): void;
  abort(requestIds: readonly string[]): void;
  /** The answers each protocol shapes its own way. */
  modelInfo(): Record<string, unknown>;
  serverInfo(): Record<string, unknown>;
  getLoads(call: grpc.ServerUnaryCall<{ dp_rank?: number | null }, unknown>, callback: grpc.sendUnaryData<unknown>): void;
  loadsOf(rank: number | null | undefined): readonly Record<string, unknown>[];
  readonly capacity: EngineCapacityView;
  readonly healthy: boolean;
}

/** The engine's size, as every protocol reports it in its own units. */
export interface EngineCapacityView {
  readonly modelName: string;
  readonly dataParallelSize: number;
  /** Per dp rank. */
  readonly numGpuBlocks: number;
  readonly blockSize: number;
  /** Per dp rank. */
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly maxModelLen: number;
}

export interface ProtocolServices {
  readonly services: readonly { readonly definition: grpc.ServiceDefinition; readonly handlers: grpc.UntypedServiceImplementation }[];
  /** Service names grpc.health.v1 reports on (besides ""). */
  readonly healthNames: readonly string[];
}

const VLLM_INFERENCE = 'vllm.Inference';
const VLLM_CONTROL = 'vllm.Control';
const SGLANG_SERVICE = 'sglang.runtime.v1.SglangService';

function service(file: string, name: string): grpc.ServiceDefinition {
  const definition = definitionOf(file)[name];
  if (definition === undefined) throw new Error(`service ${name} not found in ${file}`);
  return definition as unknown as grpc.ServiceDefinition;
}

function message(file: string, name: string): { serialize(value: object): Buffer } {
  return definitionOf(file)[name] as unknown as { serialize(value: object): Buffer };
}

type UnaryHandler = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => void;
const answer =
  (make: (request: never) => unknown): UnaryHandler =>
  (call, callback) =>
    callback(null, make(call.request as never));

export function protocolServices(protocol: EngineProtocol, host: ProtocolHost): ProtocolServices {
  switch (protocol) {
    case 'smg-vllm':
    case 'vllm-legacy':
      return smgVllm(protocol, host);
    case 'vllm-native':
      return vllmNative(host);
    case 'sglang-native':
      return sglangNative(host);
  }
}

function smgVllm(protocol: 'smg-vllm' | 'vllm-legacy', host: ProtocolHost): ProtocolServices {
  let definition = vllmEngineService().service;
  if (protocol === 'vllm-legacy') {
    // The same service and request; only the response's layout differs (proto/vllm/legacy).
    const legacy = message('vllm/legacy/vllm_engine.proto', 'vllm.grpc.engine.legacy.GenerateResponse');
    definition = { ...definition, Generate: { ...definition['Generate']!, responseSerialize: (value: object) => legacy.serialize(value) } };
  }
  const handlers: grpc.UntypedServiceImplementation = {
    Generate: (call: grpc.ServerWritableStream<GenerateRequestMessage, unknown>) => {
      const sink = streamSink(call);
      host.generate(call, call.request, protocol === 'vllm-legacy' ? legacySink(call.request.request_id, sink) : sink);
    },
    HealthCheck: answer(() => ({ healthy: host.healthy, message: host.healthy ? 'ok' : 'shutting down' })),
    Abort: answer((request: { request_ids?: string[] }) => {
      host.abort(request.request_ids ?? []);
      return {};
    }),
    GetModelInfo: answer(() => host.modelInfo()),
    GetServerInfo: answer(() => host.serverInfo()),
    GetLoads: (call: grpc.ServerUnaryCall<{ dp_rank?: number | null }, unknown>, callback: grpc.sendUnaryData<unknown>) => host.getLoads(call, callback),
  };
  return { services: [{ definition, handlers }], healthNames: [VLLM_ENGINE_SERVICE] };
}

interface VllmNativeRequest {
  request_id?: string;
  text?: string;
  token_ids?: { ids?: number[] } | null;
  stopping?: { max_new_tokens?: number } | null;
  response?: { output_token_ids?: boolean } | null;
}

function vllmNative(host: ProtocolHost): ProtocolServices {
  const toCore = (request: VllmNativeRequest, stream: boolean): GenerateRequestMessage => ({
    request_id: request.request_id || randomUUID(),
    ...(request.token_ids ? { tokenized: { input_ids: request.token_ids.ids ?? [] } } : {}),
    ...(request.text !== undefined && !request.token_ids ? { text: request.text } : {}),
    sampling_params: { max_tokens: request.stopping?.max_new_tokens || null },
    stream,
    data_parallel_rank: null,
  });
  const file = 'vllm/native/inference.proto';
  const inference: grpc.UntypedServiceImplementation = {
    GenerateStream: (call: grpc.ServerWritableStream<VllmNativeRequest, unknown>) =>
      host.generate(call, toCore(call.request, true), vllmNativeSink(call.request, streamSink(call))),
    Generate: (call: grpc.ServerUnaryCall<VllmNativeRequest, unknown>, callback: grpc.sendUnaryData<unknown>) =>
      host.generate(call, toCore(call.request, false), vllmNativeSink(call.request, unarySink(callback))),
  };
  const c = host.capacity;
  const control: grpc.UntypedServiceImplementation = {
    GetServerInfo: answer(() => ({
      engine_version: 'simulated',
      api_version: 'vllm',
      instance_id: 'simulated',
      parallelism: { tensor_parallel_size: 1, pipeline_parallel_size: 1, data_parallel_size: c.dataParallelSize, data_parallel_rank: 0 },
      max_model_len: c.maxModelLen,
      kv_block_size: c.blockSize,
      // vLLM reports the sum over the dp engines it hosts; the rest per engine.
      total_kv_blocks: c.numGpuBlocks * c.dataParallelSize,
      max_running_requests: c.maxNumSeqs,
      max_batched_tokens: c.maxNumBatchedTokens,
    })),
    GetModelInfo: answer(() => ({ model_id: c.modelName, served_model_name: c.modelName })),
    Abort: answer((request: { request_ids?: string[] }) => {
      host.abort(request.request_ids ?? []);
      return {};
    }),
  };
  return {
    services: [
      { definition: service(file, VLLM_INFERENCE), handlers: inference },
      { definition: service('vllm/native/control.proto', VLLM_CONTROL), handlers: control },
    ],
    healthNames: [VLLM_INFERENCE, VLLM_CONTROL],
  };
}

interface SglangNativeRequest {
  input_ids?: number[];
  sampling_params?: { max_new_tokens?: number | null; n?: number | null } | null;
  stream?: boolean | null;
  rid?: string | null;
  routed_dp_rank?: number | null;
}

function sglangNative(host: ProtocolHost): ProtocolServices {
  const c = host.capacity;
  const file = 'sglang/runtime/v1/sglang.proto';
  const handlers: grpc.UntypedServiceImplementation = {
    Generate: (call: grpc.ServerWritableStream<SglangNativeRequest, unknown>) => {
      const request = call.request;
      const core: GenerateRequestMessage = {
        request_id: request.rid || randomUUID(),
        tokenized: { input_ids: request.input_ids ?? [] },
        sampling_params: { max_tokens: request.sampling_params?.max_new_tokens ?? null, n: request.sampling_params?.n ?? 1 },
        stream: request.stream ?? false,
        data_parallel_rank: request.routed_dp_rank ?? null,
      };
      host.generate(call, core, sglangNativeSink(host.sglangOutput === 'incremental', streamSink(call)));
    },
    HealthCheck: answer(() => ({ healthy: host.healthy })),
    GetModelInfo: answer(() => ({ model_path: c.modelName, json_info: JSON.stringify({ model_path: c.modelName, is_generation: true }) })),
    GetServerInfo: answer(() => ({
      json_info: JSON.stringify({
        model_path: c.modelName,
        served_model_name: c.modelName,
        page_size: c.blockSize,
        // Per scheduler (dp rank); max_running_requests for the whole server, as SGLang with dp attention.
        max_total_num_tokens: c.numGpuBlocks * c.blockSize,
        max_running_requests: c.maxNumSeqs * c.dataParallelSize,
        max_prefill_tokens: c.maxNumBatchedTokens,
        chunked_prefill_size: c.maxNumBatchedTokens,
        dp_size: c.dataParallelSize,
        enable_dp_attention: c.dataParallelSize > 1,
        context_length: c.maxModelLen,
        incremental_streaming_output: host.sglangOutput === 'incremental',
      }),
    })),
    GetLoad: answer((request: { dp_rank?: number | null }) => ({ json_info: JSON.stringify(host.loadsOf(request.dp_rank)) })),
    Abort: answer((request: { rid?: string; abort_all?: boolean }) => {
      host.abort(request.rid ? [request.rid] : []);
      return { success: true };
    }),
  };
  return { services: [{ definition: service(file, SGLANG_SERVICE), handlers }], healthNames: [SGLANG_SERVICE] };
}

/** The core's sink onto a server stream. */
function streamSink(call: grpc.ServerWritableStream<unknown, unknown>): GenerateSink {
  return {
    write: (m) => call.write(m),
    end: () => call.end(),
    fail: (code, details) => call.emit('error', { code, details }),
  };
}

/** One response for a unary Generate: the last message written. */
function unarySink(callback: grpc.sendUnaryData<unknown>): GenerateSink {
  let last: unknown;
  return {
    write: (m) => (last = m),
    end: () => callback(null, last),
    fail: (code, details) => callback({ code: code as number, details }),
  };
}

/** Sink writing protocol messages made from the core's, with a fail and end that pass through. */
function mappedSink(out: GenerateSink, write: (m: GenerateResponseMessage) => void, flush: () => void = () => {}): GenerateSink {
  return {
    write,
    end: () => {
      flush();
      out.end();
    },
    fail: (code: GrpcStatus, details: string) => out.fail(code, details),
  };
}

function legacySink(requestId: string, out: GenerateSink): GenerateSink {
  const all: number[] = [];
  return mappedSink(out, (m) => {
    if (m.chunk) {
      all.push(...m.chunk.token_ids);
      out.write({ request_id: requestId, chunk: { ...m.chunk, completion_tokens: all.length } } as never);
    } else if (m.complete) {
      // Streamed: the core's complete repeats the last chunk; the legacy one holds every id.
      const ids = all.length > 0 ? all : m.complete.output_ids;
      out.write({ request_id: requestId, complete: { ...m.complete, output_ids: ids, completion_tokens: ids.length } } as never);
    }
  });
}

/** Holds a streamed chunk for one microtask, to merge it with a complete that follows at once. */
class HeldChunk {
  private held: readonly number[] | undefined;
  constructor(private readonly send: (ids: readonly number[]) => void) {}
  hold(ids: readonly number[]): void {
    this.flush();
    this.held = ids;
    queueMicrotask(() => this.flush());
  }
  /** The held ids, taken (no longer sent on their own). */
  take(): readonly number[] | undefined {
    const ids = this.held;
    this.held = undefined;
    return ids;
  }
  flush(): void {
    const ids = this.take();
    if (ids !== undefined) this.send(ids);
  }
}

const FINISH_REASONS: Record<string, string> = { length: 'LENGTH', stop: 'STOP', abort: 'ABORTED' };

function vllmNativeSink(request: VllmNativeRequest, out: GenerateSink): GenerateSink {
  const withIds = request.response?.output_token_ids === true;
  let total = 0;
  let promptSent = false;
  const outputs = (ids: readonly number[]): Record<string, unknown> => ({ index: 0, num_tokens: ids.length, token_ids: withIds ? [...ids] : [] });
  const prompt = (tokens: number): void => {
    if (promptSent) return;
    promptSent = true;
    out.write({ prompt_info: { num_prompt_tokens: tokens } } as never);
  };
  const held = new HeldChunk((ids) => out.write({ outputs: outputs(ids) } as never));
  return mappedSink(
    out,
    (m) => {
      if (m.chunk) {
        prompt(m.chunk.prompt_tokens);
        total += m.chunk.token_ids.length;
        held.hold(m.chunk.token_ids);
      } else if (m.complete) {
        const last = held.take();
        // Not streamed: the complete holds every id; streamed: it repeats the last chunk (already counted).
        const ids = last ?? (promptSent ? [] : m.complete.output_ids);
        if (!promptSent) total = ids.length;
        const finish = { num_output_tokens: total, finish_reason: FINISH_REASONS[m.complete.finish_reason] ?? 'STOP' };
        const response = { outputs: { ...outputs(ids), finish_info: finish } };
        out.write((promptSent ? response : { prompt_info: { num_prompt_tokens: m.complete.prompt_tokens }, ...response }) as never);
        promptSent = true;
      }
    },
    () => held.flush(),
  );
}

function sglangNativeSink(incremental: boolean, out: GenerateSink): GenerateSink {
  const all: number[] = [];
  let prompt = 0;
  let streamed = false;
  const meta = (extra: Record<string, unknown> = {}): Record<string, string> => {
    const fields: Record<string, unknown> = { prompt_tokens: prompt, completion_tokens: all.length, ...extra };
    return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, JSON.stringify(v)]));
  };
  const held = new HeldChunk((ids) => out.write({ output_ids: incremental ? [...ids] : [...all], meta_info: meta(), finished: false } as never));
  return mappedSink(
    out,
    (m) => {
      if (m.chunk) {
        prompt = m.chunk.prompt_tokens;
        streamed = true;
        all.push(...m.chunk.token_ids);
        held.hold(m.chunk.token_ids);
      } else if (m.complete) {
        prompt = m.complete.prompt_tokens;
        // Streamed: the core's complete repeats the last chunk, merged here; not streamed: one message with every id.
        const last = held.take() ?? [];
        if (!streamed) all.push(...m.complete.output_ids);
        const reason = { type: m.complete.finish_reason, ...(m.complete.finish_reason === 'length' ? { length: all.length } : {}) };
        const ids = incremental && streamed ? last : all;
        out.write({ output_ids: [...ids], meta_info: meta({ finish_reason: reason }), finished: true } as never);
      }
    },
    () => held.flush(),
  );
}
