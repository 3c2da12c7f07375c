/** grpc-js clients for the test engine, pointed at the sidecar or straight at the engine. */
import * as grpc from '@grpc/grpc-js';
import { loadTestEngine } from './test-engine.js';

export type TestEngineClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

export function testEngineClient(address: string, options: grpc.ClientOptions = {}): TestEngineClient {
  const { TestEngine } = loadTestEngine();
  return new TestEngine(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
    ...options,
  }) as unknown as TestEngineClient;
}

export interface UnaryOutcome<T> {
  code: grpc.status;
  details: string;
  value?: T;
  metadata?: grpc.Metadata;
  trailers?: grpc.Metadata;
}

/** Calls a unary method and resolves with the outcome instead of rejecting on error. */
export function unary<T>(
  client: TestEngineClient,
  method: string,
  request: object,
  options: { metadata?: grpc.Metadata; deadlineMs?: number | undefined; onCall?: (call: grpc.ClientUnaryCall) => void } = {},
): Promise<UnaryOutcome<T>> {
  return new Promise((resolve) => {
    const outcome: Partial<UnaryOutcome<T>> = {};
    const callOptions: grpc.CallOptions = options.deadlineMs !== undefined ? { deadline: Date.now() + options.deadlineMs } : {};
    const call = (client[method] as (...args: unknown[]) => grpc.ClientUnaryCall)(
      request,
      options.metadata ?? new grpc.Metadata(),
      callOptions,
      (err: grpc.ServiceError | null, value: T) => {
        if (err) resolve({ ...outcome, code: err.code, details: err.details, trailers: err.metadata });
        else outcome.value = value;
      },
    );
    call.on('metadata', (m: grpc.Metadata) => (outcome.metadata = m));
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code === grpc.status.OK) resolve({ ...outcome, code: s.code, details: s.details, trailers: s.metadata });
    });
    options.onCall?.(call);
  });
}
