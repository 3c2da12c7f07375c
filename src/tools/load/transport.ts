/**
 * What runLoad needs from a protocol, so that one driver (loops, stop, grace, retries,
 * progress) serves both modes: gRPC Generate at an engine or sidecar, and OpenAI-compatible
 * HTTP at a frontend. A transport draws each request from the run's seeded random stream and
 * starts its attempts; an attempt reports exactly one outcome however it ends.
 */
import * as grpc from '@grpc/grpc-js';
import type { Random } from '../../platform/prng.js';
import type { GenerateRequestMessage } from '../../protocol/engine/engine-proto.js';
import { PRIORITY_HEADER, TENANT_HEADER } from '../../protocol/request-class.js';
import { vllmEngineService } from '../../protocol/engine/engine-services.js';
import { startAttempt, type RunningAttempt } from './attempt.js';
import type { IntRange, LengthDistribution, LoadOptions } from './options.js';
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

/**
 * The request's class as headers (HTTP) or metadata (gRPC), the same names both ways:
 * x-request-priority and x-tenant-id, each only when set.
 */
export function classHeaders(options: Pick<LoadOptions, 'priority' | 'tenant'>): Record<string, string> {
  return {
    ...(options.priority !== undefined && { [PRIORITY_HEADER]: String(options.priority) }),
    ...(options.tenant !== undefined && { [TENANT_HEADER]: options.tenant }),
  };
}

/**
 * A length within `range`. uniform: every value alike. lognormal: heavy-tailed as real prompt and
 * output lengths are: ln(length) is normal with its median at the geometric mean of MIN and MAX
 * and MIN and MAX at -2 and +2 sigma (sigma = ln(MAX / MIN) / 4), rounded and cut at both ends, so
 * most requests are short and a few are long. Two draws of `random` per lognormal value (Box-Muller).
 */
export function draw(range: IntRange, random: Random, distribution: LengthDistribution = 'uniform'): number {
  if (distribution === 'uniform' || range.min === range.max) return range.min + Math.floor(random() * (range.max - range.min + 1));
  const mu = (Math.log(range.min) + Math.log(range.max)) / 2;
  const sigma = Math.log(range.max / range.min) / 4;
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.min(range.max, Math.max(range.min, Math.round(Math.exp(mu + sigma * normal))));
}

export function grpcTransport(options: LoadOptions, random: Random, recorder: LoadRecorder): LoadTransport {
  const target = options.target!;
  const Client = vllmEngineService();
  const client = new Client(target, grpc.credentials.createInsecure());
  const metadata = classHeaders(options);
  return {
    target,
    prepare(index) {
      const promptLength = draw(options.promptTokens, random, options.lengthDistribution);
      const inputIds = Array.from({ length: promptLength }, () => 1 + Math.floor(random() * (VOCAB - 1)));
      const request: GenerateRequestMessage = {
        request_id: `load-${options.seed}-${index}`,
        tokenized: { original_text: '', input_ids: inputIds },
        sampling_params: { max_tokens: draw(options.maxTokens, random, options.lengthDistribution), n: 1 },
        stream: options.stream,
      };
      return () => startAttempt(client, request, options.deadlineMs, recorder, metadata);
    },
    close: () => client.close(),
  };
}
