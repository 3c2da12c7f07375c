/**
 * The attempt loop: route, call the chosen worker's sidecar, and wait for its first message or
 * the call's end. A worker that refuses before any output (RESOURCE_EXHAUSTED: its admission
 * gate is full; UNAVAILABLE: cannot be reached) is reported to the router, added to the
 * request's tried set, and the request goes to the next worker the router picks; routing
 * decisions that are not a worker become typed errors (404, 503, the overload status). Once a
 * first message has arrived the request belongs to that worker: no retry after that point.
 * Every attempt is routed with the request's priority (its class scales the busy thresholds)
 * and carries it, and the tenant, as gRPC metadata.
 */
import type { GenerateRequestMessage } from '../../protocol/engine/engine-proto.js';
import { tighterSlo } from '../../protocol/request-class.js';
import type { Logger } from '../../platform/log.js';
import type { RequestRecord } from '../frontend-metrics.js';
import type { EncodedPrompt } from '../text/prompt-encoding.js';
import type { InFlight, RouteDecision, Router } from '../routing/contracts.js';
import { ClientGoneError, FrontendError } from './errors.js';
import { Generation } from './generation.js';
import type { CallClass, WorkerClients } from './worker-clients.js';
import { WorkerStream } from './worker-stream.js';
import { pushbackMsOf, refusalOf, workerFailure } from './worker-status.js';

export interface GenerationRequest {
  /** Sent as the gRPC request_id (the sidecar and engine log it). */
  readonly requestId: string;
  readonly model: string;
  /** Its token count and `tokenized` field, as prompt-admission.ts gave them. */
  readonly prompt: EncodedPrompt;
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly seed?: number;
  /** Lower runs sooner: picks the routing class and is sent to every attempt as `x-request-priority`. */
  readonly priority: number;
  /** Sent as `x-tenant-id` when given. */
  readonly tenant?: string;
  /** x-slo-ttft-ms: tightens the frontend's TTFT SLO for this request. */
  readonly ttftSloMs?: number;
}

export interface AttemptDeps {
  readonly router: Router;
  readonly workers: WorkerClients;
  readonly logger: Logger;
}

/**
 * Starts the request on a worker and resolves once that worker sent its first message.
 * Throws FrontendError (routing outcome or worker failure) or ClientGoneError (signal aborted).
 */
export async function startGeneration(deps: AttemptDeps, request: GenerationRequest, record: RequestRecord, signal: AbortSignal): Promise<Generation> {
  const { router, workers, logger } = deps;
  const message = generateRequest(request);
  // Metadata, not a message field: SMG's GenerateRequest has no priority (docs/frontend.md).
  const callClass: CallClass = request.tenant === undefined ? { priority: request.priority } : { priority: request.priority, tenant: request.tenant };
  const promptTokens = request.prompt.tokens;
  const tried = new Set<string>();
  const startedAt = Date.now();
  // The soonest any refusing worker expects room: the client's Retry-After if every one refuses.
  let soonestPushbackMs: number | undefined;
  for (;;) {
    if (signal.aborted) throw new ClientGoneError();
    // Every attempt, a retry after a refusal included, is routed by the request's class: a low class sees workers busy sooner.
    const decision = router.route(request.model, tried, promptTokens, request.priority, request.tenant, request.ttftSloMs);
    if (decision.kind !== 'route') throw rejection(decision, soonest(soonestPushbackMs, decision.kind === 'overloaded' ? decision.retryAfterMs : undefined));
    const { target } = decision;
    if (tried.has(target.workerId)) {
      // The contract says the router skips tried workers; trying one again could loop forever.
      logger.warn('router chose a worker this request already tried', { model: request.model, worker_id: target.workerId });
      throw new FrontendError('unavailable', 'no untried worker left');
    }
    if (tried.size > 0) record.retried();
    const inflight = endOnce(router.begin(target, promptTokens));
    let stream: WorkerStream;
    try {
      // What is left of the request's TTFT SLO goes with each attempt: a retry may wait only that long at its worker.
      const sloMs = tighterSlo(router.ttftSloMs, request.ttftSloMs);
      const attemptClass = sloMs === undefined ? callClass : { ...callClass, ttftSloMs: sloMs - (Date.now() - startedAt) };
      stream = new WorkerStream(workers.generate(target, message, attemptClass));
    } catch (error) {
      inflight.end();
      throw new FrontendError('internal', `cannot start the worker call: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    const onAbort = (): void => stream.cancel();
    signal.addEventListener('abort', onAbort, { once: true });
    const first = await stream.peek();
    const removeListener = (): void => signal.removeEventListener('abort', onAbort);
    if (first.kind === 'message' && !signal.aborted) {
      return new Generation({
        stream,
        inflight,
        record,
        signal,
        onClose: removeListener,
        address: target.address,
        workerId: target.workerId,
        promptTokens,
        logger,
      });
    }
    stream.cancel();
    inflight.end();
    removeListener();
    if (signal.aborted) throw new ClientGoneError();
    if (first.kind !== 'end') throw new FrontendError('internal', 'attempt ended with a message unread');
    const { code, details } = first.status;
    const refusal = refusalOf(first.status);
    if (refusal === undefined) {
      // debug, not warn: a failing worker would log once per request; dynamo_frontend_requests_total{status="502"} counts them.
      logger.debug('worker failed a request before any output', { model: request.model, worker_id: target.workerId, address: target.address, code, details });
      throw workerFailure(first.status, target.address);
    }
    const pushbackMs = refusal === 'overloaded' ? pushbackMsOf(first.status) : undefined;
    router.workerRefused(target, refusal, pushbackMs, callClass);
    record.workerRefused(refusal);
    soonestPushbackMs = soonest(soonestPushbackMs, pushbackMs);
    tried.add(target.workerId);
    logger.debug('worker refused a request; trying another', { model: request.model, worker_id: target.workerId, reason: refusal, details });
  }
}

function generateRequest(request: GenerationRequest): GenerateRequestMessage {
  return {
    request_id: request.requestId,
    // Ids only, already in wire form: no copy of them as an array, and no second copy of the text (tokenized-input.ts).
    tokenized_bytes: request.prompt.tokenized,
    sampling_params: {
      n: 1,
      ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
      ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
      ...(request.seed === undefined ? {} : { seed: request.seed }),
    },
    // Always streamed from the worker, so time to first token and inter-token latency are real.
    stream: true,
  };
}

function rejection(decision: Exclude<RouteDecision, { kind: 'route' }>, retryAfterMs: number | undefined): FrontendError {
  switch (decision.kind) {
    case 'overloaded':
      return new FrontendError('overloaded', 'every worker of the model is busy', { details: decision.details, retryAfterMs });
    case 'unknown_model':
      return new FrontendError('unknown_model', 'no worker serves the model');
    case 'unavailable':
      return new FrontendError('unavailable', decision.reason);
    case 'no_workers':
      return new FrontendError('unavailable', 'no worker is known');
  }
}

function soonest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

/** The router's InFlight with end() guarded, whatever the router's own guarantee. */
function endOnce(inflight: InFlight): InFlight {
  let ended = false;
  return {
    outputTokens: (delta) => {
      if (!ended) inflight.outputTokens(delta);
    },
    end: () => {
      if (ended) return;
      ended = true;
      inflight.end();
    },
  };
}
