/**
 * One Generate attempt: sends the request, times the first token and the gaps between
 * token-carrying messages, and reports exactly one outcome however the call ends.
 */
import * as grpc from '@grpc/grpc-js';
import type { GenerateRequestMessage, GenerateResponseMessage } from '../../protocol/engine/engine-proto.js';
import type { AttemptOutcome, LoadRecorder } from './stats.js';
import { readPushback } from './retry.js';
import { TokenClock } from './token-clock.js';
import { asGrpcStatus } from '../../protocol/grpc/status.js';

export interface AttemptResult {
  readonly outcome: AttemptOutcome;
  readonly pushback: number | 'stop' | undefined;
}

export interface RunningAttempt {
  readonly done: Promise<AttemptResult>;
  cancel(): void;
}

type GenerateMethod = (request: GenerateRequestMessage, options: grpc.CallOptions) => grpc.ClientReadableStream<GenerateResponseMessage>;
type GenerateWithMetadata = (
  request: GenerateRequestMessage,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
) => grpc.ClientReadableStream<GenerateResponseMessage>;

function toMetadata(entries: Readonly<Record<string, string>>): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(entries)) metadata.set(key, value);
  return metadata;
}

/** `metadata`: the request's class headers (x-request-priority, x-tenant-id), sent with every attempt; undefined = none. */
export function startAttempt(
  client: grpc.Client,
  request: GenerateRequestMessage,
  deadlineMs: number | undefined,
  recorder: LoadRecorder,
  metadata?: Readonly<Record<string, string>>,
): RunningAttempt {
  const generate = (client as unknown as { Generate: GenerateMethod }).Generate;
  const options: grpc.CallOptions = deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
  const clock = new TokenClock(performance.now(), recorder);
  let sawComplete = false;
  const call =
    metadata === undefined || Object.keys(metadata).length === 0
      ? generate.call(client, request, options)
      : (client as unknown as { Generate: GenerateWithMetadata }).Generate.call(client, request, toMetadata(metadata), options);
  let streamedTokens = 0;
  call.on('data', (message: GenerateResponseMessage) => {
    if (message.chunk) {
      streamedTokens += message.chunk.token_ids.length;
      clock.tokens(message.chunk.token_ids.length);
    } else if (message.complete) {
      sawComplete = true;
      // Non-streaming calls carry every token here; streaming ones repeat tokens already seen.
      clock.tokens(Math.max(0, message.complete.output_ids.length - streamedTokens));
    }
  });
  call.on('error', () => {}); // 'status' below carries the same information for every ending.
  const done = new Promise<AttemptResult>((resolve) => {
    call.on('status', (status: grpc.StatusObject) => {
      if (status.code !== grpc.status.OK) {
        resolve({ outcome: { kind: 'failed', code: asGrpcStatus(status.code) }, pushback: readPushback(status.metadata) });
      } else if (sawComplete) {
        resolve({ outcome: { kind: 'completed', timing: clock.timing }, pushback: undefined });
      } else {
        resolve({ outcome: { kind: 'bad-response', label: 'NO_COMPLETE' }, pushback: undefined });
      }
    });
  });
  return { done, cancel: () => call.cancel() };
}
