/**
 * One question put to the engine until it answers (GetModelInfo for the served model, GetLoads
 * for its capacity): a unary call on the engine's own service, asked over the proxy's engine
 * connection but outside the admission gate (never a slot, never queued, never counted as a
 * proxied call).
 *
 *   const q = new EngineQuestion({ engine, path, what: 'its model', decide, logger });
 *   q.start();  ...  q.stop();
 *
 * States: idle -> waiting (for the engine to be reachable, or for the retry timer) -> asking ->
 * done, and stopped from any of them.
 * - Asked once the engine is reachable. One attempt at a time, each bounded by `timeoutMs`; a
 *   failed attempt (engine busy, starting, connection lost, no answer, an answer `decide` cannot
 *   read) is retried `retryMs` later, or as soon as the engine is reachable again if it is not
 *   then. The first failure is logged once, not every attempt.
 * - Asking stops for good at the first answer `decide` accepts, or at UNIMPLEMENTED (an engine
 *   without this service), which goes to `decide` as `undefined` so it can say what follows.
 */
import type { ClientHttp2Stream, OutgoingHttpHeaders } from 'node:http2';
import { MODEL_INFO_RETRY_MS, MODEL_INFO_TIMEOUT_MS } from '../config/sidecar-config.js';
import { GrpcStatus, statusName } from '../../protocol/grpc/status.js';
import { unaryCall, type OpenStream, type UnaryOutcome } from '../../protocol/grpc/unary-call.js';
import type { Logger } from '../../platform/log.js';

/** What a question needs of the engine connection (UpstreamPool). */
export interface QuestionedEngine {
  request(headers: OutgoingHttpHeaders): ClientHttp2Stream;
  readonly reachable: boolean;
  onReachabilityChange(listener: (reachable: boolean) => void): () => void;
  /** Every new connection to the engine after the first. */
  onReconnect(listener: () => void): () => void;
}

export interface EngineQuestionOptions {
  readonly engine: QuestionedEngine;
  /** The RPC's path, e.g. /vllm.grpc.engine.VllmEngine/GetModelInfo. */
  readonly path: string;
  /** For the failure log: "cannot ask the engine for {what} yet". */
  readonly what: string;
  /**
   * The answer's bytes (`undefined`: UNIMPLEMENTED, the last word): act on them, with the number
   * of attempts made, and return nothing; throw to count them as a failed attempt (undecodable).
   */
  readonly decide: (body: Buffer | undefined, attempts: number) => void;
  readonly logger: Logger;
  /** Undefined: MODEL_INFO_TIMEOUT_MS and MODEL_INFO_RETRY_MS. */
  readonly timeoutMs?: number | undefined;
  readonly retryMs?: number | undefined;
}

type QuestionState = 'idle' | 'waiting' | 'asking' | 'done' | 'stopped';

export class EngineQuestion {
  private state: QuestionState = 'idle';
  private attempts = 0;
  private failureLogged = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private inFlight: AbortController | undefined;
  private readonly timeoutMs: number;
  private readonly retryMs: number;

  constructor(private readonly options: EngineQuestionOptions) {
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
    void unaryCall(open, this.options.path, new Uint8Array(0), { timeoutMs: this.timeoutMs, signal: controller.signal }).then((outcome) => {
      this.inFlight = undefined;
      if (this.state === 'asking') this.settle(outcome);
    });
  }

  private settle(outcome: UnaryOutcome): void {
    if (outcome.status !== GrpcStatus.OK && outcome.status !== GrpcStatus.UNIMPLEMENTED) return this.failed(outcome);
    const body = outcome.status === GrpcStatus.OK ? (outcome.body ?? Buffer.alloc(0)) : undefined;
    try {
      this.options.decide(body, this.attempts);
    } catch (err) {
      return this.failed({ status: GrpcStatus.INTERNAL, message: (err as Error).message });
    }
    this.finish();
  }

  private failed(outcome: Pick<UnaryOutcome, 'status' | 'message'>): void {
    if (!this.failureLogged) {
      this.failureLogged = true;
      this.options.logger.warn(`cannot ask the engine for ${this.options.what} yet; retrying every ${this.retryMs} ms while it is reachable (logged once)`, {
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
