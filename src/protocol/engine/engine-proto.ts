/**
 * Loads the repo's .proto files with proto-loader (no code generation step) and describes the
 * decoded message shapes the engine and the load client use. Paths resolve relative to this
 * module, which sits two levels below the package root in both src/ and dist/. The gRPC service
 * constructors are in engine-services.ts: the sidecar needs only messages, and grpc-js would add
 * 13-17 MB to its resident memory.
 */
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_DIR } from '../proto-path.js';

/** keepCase keeps snake_case field names as on the wire; oneofs adds the virtual case field. */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

export const VLLM_ENGINE_SERVICE = 'vllm.grpc.engine.VllmEngine';
export const HEALTH_SERVICE = 'grpc.health.v1.Health';

export const VLLM_ENGINE_PROTO = 'vllm/vllm_engine.proto';
const definitions = new Map<string, protoLoader.PackageDefinition>();

/** Each .proto file is parsed once per process, whoever asks for it first. */
export function definitionOf(file: string): protoLoader.PackageDefinition {
  let definition = definitions.get(file);
  if (definition === undefined) {
    definition = protoLoader.loadSync(file, LOADER_OPTIONS);
    definitions.set(file, definition);
  }
  return definition;
}

/** A message type of vllm.grpc.engine (e.g. 'GetLoadsResponse'), to (de)serialize raw bytes. */
export function vllmEngineMessage<T extends object>(name: string): protoLoader.MessageTypeDefinition<object, T> {
  const type = definitionOf(VLLM_ENGINE_PROTO)[`vllm.grpc.engine.${name}`];
  if (type === undefined || !('serialize' in type)) throw new Error(`message vllm.grpc.engine.${name} not found in ${VLLM_ENGINE_PROTO}`);
  return type as protoLoader.MessageTypeDefinition<object, T>;
}

export interface SamplingParamsMessage {
  max_tokens?: number | null;
  n?: number;
  temperature?: number | null;
  min_tokens?: number;
  ignore_eos?: boolean;
  seed?: number | null;
}

export interface GenerateRequestMessage {
  request_id: string;
  tokenized?: { original_text?: string; input_ids?: number[] } | null;
  /**
   * The `tokenized` field already encoded (tokenized-input.ts), instead of `tokenized`: the
   * client's serializer appends these bytes to the other fields' as they are (engine-services.ts).
   */
  tokenized_bytes?: Uint8Array;
  text?: string;
  input?: 'tokenized' | 'text';
  sampling_params?: SamplingParamsMessage | null;
  stream: boolean;
  /** Unset (null/undefined) lets the engine pick the rank. */
  data_parallel_rank?: number | null;
}

/** vLLM's counters are per message (DELTA streaming); see proto/vllm/vllm_engine.proto. */
export interface GenerateStreamChunkMessage {
  token_ids: number[];
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
}

export interface GenerateCompleteMessage {
  output_ids: number[];
  finish_reason: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
}

/** No request_id and no error branch: an engine reports a failure as the call's gRPC status. */
export interface GenerateResponseMessage {
  chunk?: GenerateStreamChunkMessage | null;
  complete?: GenerateCompleteMessage | null;
  response?: 'chunk' | 'complete';
}

export interface SchedulerLoadMessage {
  dp_rank: number;
  num_running_reqs: number;
  num_waiting_reqs: number;
  num_total_reqs: number;
  num_used_tokens: number;
  max_total_num_tokens: number;
  token_usage: number;
  gen_throughput: number;
  cache_hit_rate: number;
  utilization: number;
  max_running_requests: number;
}

export interface GetLoadsResponseMessage {
  timestamp: string;
  version: string;
  dp_rank_count: number;
  loads: SchedulerLoadMessage[];
}
