/**
 * What runLoad needs from a protocol, so that one driver (loops, stop, grace, retries,
 * progress) serves both modes: gRPC Generate at an engine or sidecar, and OpenAI-compatible
 * HTTP at a frontend. A transport draws each request from the run's seeded random stream and
 * starts its attempts; an attempt reports exactly one outcome however it ends.
 */
import * as grpc from '@grpc/grpc-js';
import type { Random } from '../../platform/prng.js';
import type { GenerateRequestMessage } from '../../protocol/engine/engine-proto.js';
import { vllmEngineService } from '../../protocol/engine/engine-services.js';
import { startAttempt, type RunningAttempt } from './attempt.js';
import type { IntRange, LoadOptions } from './options.js';
import type { LoadRecorder } from './stats.js';

export interface LoadTransport {
  /** Named in the summary: host:port, or the endpoint URL. */
  readonly target: string;
  /** Summary fields beyond the target (--openai: model and api). */
  readonly describe?: { readonly model: string; readonly api: string };
  /** Draws request `index` (lengths, content) now; the returned function starts one attempt of it. */
  prepare(index: number): () => RunningAttempt;
  close(): void;
}

/** The run could not start (--openai: no model to ask for); the CLI prints it and exits 1. */
export class LoadSetupError extends Error {
  override readonly name = 'LoadSetupError';
}

const VOCAB = 32_000;

export function draw(range: IntRange, random: Random): number {
  return range.min + Math.floor(random() * (range.max - range.min + 1));
}

export function grpcTransport(options: LoadOptions, random: Random, recorder: LoadRecorder): LoadTransport {
  const target = options.target!;
  const Client = vllmEngineService();
  const client = new Client(target, grpc.credentials.createInsecure());
  return {
    target,
    prepare(index) {
      const promptLength = draw(options.promptTokens, random);
      const inputIds = Array.from({ length: promptLength }, () => 1 + Math.floor(random() * (VOCAB - 1)));
      const request: GenerateRequestMessage = {
        request_id: `load-${options.seed}-${index}`,
        tokenized: { original_text: '', input_ids: inputIds },
        sampling_params: { max_tokens: draw(options.maxTokens, random), n: 1 },
        stream: options.stream,
      };
      return () => startAttempt(client, request, options.deadlineMs, recorder);
    },
    close: () => client.close(),
  };
}
