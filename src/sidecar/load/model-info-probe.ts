/**
 * Learns the served model (the `model` of load events) from the engine when no
 * --served-model-name is given: GetModelInfo of the --generate-wire service (vLLM's
 * vllm.grpc.engine.VllmEngine or SGLang's sglang.grpc.scheduler.SglangScheduler, whose
 * responses number served_model_name 6 and model_path 1 alike). served_model_name is the name
 * clients use; model_path (the weights' path or hub id) stands in when it is empty.
 *
 *   const probe = new ModelInfoProbe({ engine: upstreamPool, onModel: (name) => tracker.setModel(name), logger });
 *   probe.start();  ...  probe.stop();
 *
 * - Asked once the engine is reachable, over the proxy's own engine connection but outside the
 *   admission gate: it never takes a slot, is never queued and never counted as a proxied call.
 * - One attempt at a time, each bounded by `timeoutMs`; a failed attempt (engine busy, starting,
 *   connection lost, no answer) is retried `retryMs` later, or as soon as the engine is reachable
 *   again if it is not then. The first failure is logged once, not every attempt; the answer,
 *   when it comes, is logged once.
 * - Asking stops for good at the first answer: a model name; an answer with neither name; or
 *   UNIMPLEMENTED (an engine without this service). In the last two cases
 *   the model stays null and one warning says to pass --served-model-name.
 */
import type { ClientHttp2Stream, OutgoingHttpHeaders } from 'node:http2';
import type { MessageTypeDefinition } from '@grpc/proto-loader';
import { MODEL_INFO_RETRY_MS, MODEL_INFO_TIMEOUT_MS } from '../config/sidecar-config.js';
import { GrpcStatus, statusName } from '../../protocol/grpc/status.js';
import { unaryCall, type OpenStream, type UnaryOutcome } from '../../protocol/grpc/unary-call.js';
import type { Logger } from '../../platform/log.js';
import { vllmEngineMessage } from '../../protocol/engine/engine-proto.js';
import { enginePath, type GenerateWire } from '../../protocol/engine/generate-wire.js';

interface ModelInfoFields {
  model_path?: string;
  served_model_name?: string;
}

/** What the probe needs of the engine connection (UpstreamPool). */
export interface ModelInfoEngine {
  request(headers: OutgoingHttpHeaders): ClientHttp2Stream;
  readonly reachable: boolean;
  onReachabilityChange(listener: (reachable: boolean) => void): () => void;
}

export interface ModelInfoProbeOptions {
  readonly engine: ModelInfoEngine;
  /** Which engine service to ask; default vllm. */
  readonly wire?: GenerateWire;
  /** Called once, with a non-empty name. */
  readonly onModel: (name: string) => void;
  readonly logger: Logger;
  readonly timeoutMs?: number;
  readonly retryMs?: number;
}

type ProbeState = 'idle' | 'waiting' | 'asking' | 'done' | 'stopped';

export class ModelInfoProbe {
  private state: ProbeState = 'idle';
  private attempts = 0;
  private failureLogged = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private inFlight: AbortController | undefined;
  private readonly response: MessageTypeDefinition<object, ModelInfoFields>;
  private readonly path: string;
  private readonly timeoutMs: number;
  private readonly retryMs: number;

  constructor(private readonly options: ModelInfoProbeOptions) {
    this.response = vllmEngineMessage<ModelInfoFields>('GetModelInfoResponse');
    this.path = enginePath(options.wire ?? 'vllm', 'GetModelInfo');
    this.timeoutMs = options.timeoutMs ?? MODEL_INFO_TIMEOUT_MS;
    this.retryMs = options.retryMs ?? MODEL_INFO_RETRY_MS;
  }

  /** Attempts made so far (for tests and logs). */
  get attemptCount(): number {
    return this.attempts;
  }

  get finished(): boolean {
    return this.state === 'done' || this.state === 'stopped';
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'waiting';
    this.unsubscribe = this.options.engine.onReachabilityChange((reachable) => {
      // A pending retry keeps its own pace; otherwise ask as soon as the engine is back.
      if (reachable && this.retryTimer === undefined) this.ask();
    });
    this.ask();
  }

  /** Stops asking; an attempt in flight is cancelled. Idempotent. */
  stop(): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.clearRetry();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.inFlight?.abort();
  }

  private ask(): void {
    if (this.state !== 'waiting' || !this.options.engine.reachable) return;
    this.state = 'asking';
    this.attempts++;
    const controller = new AbortController();
    this.inFlight = controller;
    const open: OpenStream = (headers) => this.options.engine.request(headers);
    void unaryCall(open, this.path, new Uint8Array(0), { timeoutMs: this.timeoutMs, signal: controller.signal }).then((outcome) => {
      this.inFlight = undefined;
      if (this.state === 'asking') this.settle(outcome);
    });
  }

  private settle(outcome: UnaryOutcome): void {
    const log = this.options.logger;
    if (outcome.status === GrpcStatus.UNIMPLEMENTED) {
      this.finish();
      log.warn('the engine does not implement GetModelInfo: model unknown (null in load events); pass --served-model-name', { path: this.path });
      return;
    }
    if (outcome.status === GrpcStatus.OK) {
      let name: string | undefined;
      try {
        const info = this.response.deserialize(outcome.body ?? Buffer.alloc(0));
        name = (info.served_model_name ?? '').trim() || (info.model_path ?? '').trim();
      } catch (err) {
        return this.failed({ status: GrpcStatus.INTERNAL, message: `undecodable GetModelInfoResponse: ${(err as Error).message}` });
      }
      this.finish();
      if (name === '') {
        log.warn('the engine answered GetModelInfo without served_model_name or model_path: model unknown (null in load events); pass --served-model-name', {
          attempts: this.attempts,
        });
        return;
      }
      log.info('served model from the engine', { model: name, attempts: this.attempts });
      this.options.onModel(name);
      return;
    }
    this.failed(outcome);
  }

  private failed(outcome: UnaryOutcome): void {
    if (!this.failureLogged) {
      this.failureLogged = true;
      this.options.logger.warn(`cannot ask the engine for its model yet; retrying every ${this.retryMs} ms while it is reachable (logged once)`, {
        status: statusName(outcome.status),
        reason: outcome.message,
      });
    }
    this.state = 'waiting';
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.ask();
    }, this.retryMs);
    this.retryTimer.unref();
  }

  private finish(): void {
    this.state = 'done';
    this.clearRetry();
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  private clearRetry(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }
}
