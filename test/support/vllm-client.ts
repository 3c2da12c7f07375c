/**
 * Test clients generated at run time from the repo's .proto files (proto-loader + grpc-js),
 * the way any third-party client would be, plus promise helpers for one Generate call.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { GenerateResponseMessage } from '../../src/protocol/engine/engine-proto.js';

const PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url));
const OPTIONS: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_ROOT] };

function service(file: string, path: string[]): grpc.ServiceClientConstructor {
  let node: unknown = grpc.loadPackageDefinition(protoLoader.loadSync(file, OPTIONS));
  for (const part of path) node = (node as Record<string, unknown>)[part];
  return node as grpc.ServiceClientConstructor;
}

export const VllmEngineClient = service('vllm/vllm_engine.proto', ['vllm', 'grpc', 'engine', 'VllmEngine']);
export const HealthClient = service('grpc/health/v1/health.proto', ['grpc', 'health', 'v1', 'Health']);

export function engineClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  options: grpc.ClientOptions = {},
): grpc.Client {
  return new VllmEngineClient(address, credentials, options);
}

export function healthClient(address: string): grpc.Client {
  return new HealthClient(address, grpc.credentials.createInsecure());
}

type UnaryMethod = (request: unknown, callback: (error: grpc.ServiceError | null, response: unknown) => void) => void;

/** Calls a unary method by name and resolves with its response (rejects with the ServiceError). */
export function unary<T = Record<string, unknown>>(client: grpc.Client, method: string, request: unknown = {}): Promise<T> {
  const fn = (client as unknown as Record<string, UnaryMethod>)[method]!.bind(client);
  return new Promise((resolve, reject) => fn(request, (error, response) => (error ? reject(error) : resolve(response as T))));
}

export interface GenerateOutcome {
  messages: GenerateResponseMessage[];
  code: grpc.status;
  details: string;
}

/** Runs one Generate call to its end and collects every message plus the final status. */
export function generate(client: grpc.Client, request: unknown, callOptions: grpc.CallOptions = {}): Promise<GenerateOutcome> {
  const call = startGenerate(client, request, callOptions);
  const messages: GenerateResponseMessage[] = [];
  call.on('data', (m: GenerateResponseMessage) => messages.push(m));
  return new Promise((resolve) => {
    // 'status' always fires once, after the last 'data', for success and failure alike.
    call.on('error', () => {});
    call.on('status', (s: grpc.StatusObject) => resolve({ messages, code: s.code, details: s.details }));
  });
}

/** Starts a Generate call, with `metadata` (request headers) when given. */
export function startGenerate(
  client: grpc.Client,
  request: unknown,
  callOptions: grpc.CallOptions = {},
  metadata?: grpc.Metadata,
): grpc.ClientReadableStream<unknown> {
  type Generate = (r: unknown, ...rest: [grpc.CallOptions] | [grpc.Metadata, grpc.CallOptions]) => grpc.ClientReadableStream<unknown>;
  const fn = (client as unknown as Record<string, Generate>)['Generate']!;
  return metadata ? fn.call(client, request, metadata, callOptions) : fn.call(client, request, callOptions);
}

/**
 * Starts `count` Generate calls of 8 prompt tokens that run for minutes (4,000 output tokens,
 * ignore_eos), to fill a sidecar or an engine; their errors (the cancel itself) are swallowed.
 * cancel() ends them all.
 */
export function holdCalls(client: grpc.Client, count: number): { cancel(): void } {
  const calls = Array.from({ length: count }, (_, i) =>
    startGenerate(client, {
      request_id: `hold-${i}`,
      tokenized: { original_text: '', input_ids: tokens(8) },
      sampling_params: { max_tokens: 4000, ignore_eos: true },
      stream: true,
    }),
  );
  for (const call of calls) call.on('error', () => {});
  return { cancel: () => calls.forEach((c) => c.cancel()) };
}

export interface StreamedEnding {
  readonly code: grpc.status;
  /** grpc-retry-pushback-ms of a refusal, as sent. */
  readonly pushbackMs: string | undefined;
  readonly messages: number;
}

/** A streaming Generate of `maxTokens` tokens (ignore_eos) after a prompt of `promptTokens`; `ended` resolves at its end. */
export function streamTokens(client: grpc.Client, id: string, promptTokens: number, maxTokens: number): { ended: Promise<StreamedEnding>; cancel(): void } {
  const stream = startGenerate(client, {
    request_id: id,
    tokenized: { original_text: '', input_ids: tokens(promptTokens) },
    sampling_params: { max_tokens: maxTokens, ignore_eos: true },
    stream: true,
  });
  let messages = 0;
  stream.on('data', () => messages++);
  stream.on('error', () => {});
  const ended = new Promise<StreamedEnding>((resolve) =>
    stream.on('status', (s: grpc.StatusObject) => resolve({ code: s.code, pushbackMs: s.metadata.get('grpc-retry-pushback-ms')[0]?.toString(), messages })),
  );
  return { ended, cancel: () => stream.cancel() };
}

export function tokens(count: number, start = 1): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}

/** Value of a metric line `name{labels} value` in a Prometheus text body (first match). */
export function metricValue(body: string, name: string): number | undefined {
  for (const line of body.split('\n')) {
    if (line.startsWith(name + '{') || line.startsWith(name + ' ')) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
