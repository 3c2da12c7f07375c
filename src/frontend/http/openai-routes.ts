/**
 * The OpenAI routes: GET /v1/models, POST /v1/completions and /v1/chat/completions. A
 * completion request's prompt is admitted (tokenized, off the event loop when large, and
 * refused when no worker message can hold it: generate/prompt-admission.ts), started on a
 * worker by the attempt loop, then answered
 * whole or streamed (by the body's `stream` flag; @fastify/sse in 'manual' mode). Every
 * failure, Fastify's own included, goes through this plugin's error handler and the error
 * table; overload answers carry Retry-After and count in dynamo_frontend_model_rejection_total.
 * A client that leaves (response closed before it finished) aborts the request, which cancels
 * its worker call at once.
 *
 * Each request's class (priority and tenant: resolve-request-class.ts) is resolved once its body
 * is read; a tenant at --tenant-max-inflight gets 429 before anything else is done, and its slot
 * is held until the response closes, however it ends.
 */
import type {} from '@fastify/sse';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../../platform/log.js';
import { CLIENT_CLOSED_STATUS, UNKNOWN_MODEL_LABEL, type Endpoint, type FrontendMetrics, type RequestRecord } from '../frontend-metrics.js';
import { startGeneration, type GenerationRequest } from '../generate/attempt-loop.js';
import { ClientGoneError, FrontendError } from '../generate/errors.js';
import type { PromptAdmission } from '../generate/prompt-admission.js';
import { readOutput } from '../generate/read-output.js';
import type { WorkerClients } from '../generate/worker-clients.js';
import type { Router, ThresholdApi } from '../routing/contracts.js';
import { priorityClassOf } from '../routing/priority-classes.js';
import type { RequestClassMetrics } from '../request-class-metrics.js';
import { OutputText } from '../text/output-text.js';
import type { EncodedPrompt } from '../text/prompt-encoding.js';
import type { PromptTokenizer } from '../text/prompt-tokenizer.js';
import { streamAnswer } from './answer-stream.js';
import { errorAnswer, toFrontendError } from './error-table.js';
import { discardRestOfBody } from './refused-body.js';
import { resolveRequestClass, type ClassFields, type RequestClass } from './resolve-request-class.js';
import type { TenantInflight, TenantLease } from './tenant-inflight.js';
import { chatJob, completionsJob, type ChatBody, type CompletionJob, type CompletionsBody } from './openai-request.js';
import { CHAT_COMPLETIONS_BODY, COMPLETIONS_BODY } from './openai-schemas.js';
import { ChunkShapes, idPrefix, usage, wholeResponse } from './openai-shapes.js';

export interface OpenAiRouteDeps {
  readonly router: Router;
  readonly workers: WorkerClients;
  /** Decodes output ids. */
  readonly tokenizer: PromptTokenizer;
  /** Tokenizes prompts (off the event loop when large) and refuses those no worker message can hold. */
  readonly prompts: PromptAdmission;
  readonly metrics: FrontendMetrics;
  /** Outcomes per priority class and tenant, and each tenant's requests in flight. */
  readonly classMetrics: RequestClassMetrics;
  /** Each model's priority classes, for the class a request is counted under. */
  readonly thresholds: Pick<ThresholdApi, 'priorityScales'>;
  /** Per-tenant in-flight counts and the cap (429 beyond it). */
  readonly tenants: TenantInflight;
  /** Priority of requests that give none. */
  readonly defaultPriority: number;
  readonly logger: Logger;
  readonly overloadStatus: number;
  readonly retryAfterS: number;
  /** Wall clock, ms, for `created`. */
  readonly now: () => number;
  readonly newRequestId: () => string;
  /** `created` of every model in /v1/models (unix seconds). */
  readonly modelsCreated: number;
}

/** Per request: its metrics, the signal that fires when its client goes away, and what its end must settle. */
interface RequestState {
  readonly record: RequestRecord;
  readonly abort: AbortController;
  /** The response closed (finished or not): a lease taken after this is released at once. */
  closed: boolean;
  /** Its tenant's slot, released when the response closes, however it ends. */
  lease?: TenantLease;
  /** Once its class is resolved: what its outcome is counted under. */
  counted?: { readonly priorityClass: string; readonly tenant: string | undefined };
  /** Set by the error handler for the two refusals counted as such. */
  refusal?: 'overloaded' | 'tenant_capped';
}

/** The most of a refused body read and dropped so that its client gets the 413 (more: the connection is closed). */
const DISCARD_MAX_BYTES = 64 * 1024 * 1024;

const ENDPOINTS: Readonly<Record<string, Endpoint>> = { '/v1/completions': 'completions', '/v1/chat/completions': 'chat_completions' };

export function openAiRoutes(app: FastifyInstance, deps: OpenAiRouteDeps, done: (err?: Error) => void): void {
  const states = new WeakMap<FastifyRequest, RequestState>();
  const errorOptions = { overloadStatus: deps.overloadStatus };

  app.addHook('onRequest', (request, reply, done) => {
    const endpoint = ENDPOINTS[request.routeOptions.url ?? ''];
    if (endpoint !== undefined) {
      const state: RequestState = { record: deps.metrics.startRequest(endpoint), abort: new AbortController(), closed: false };
      states.set(request, state);
      // 'close' without 'finish' = the connection went before the answer was complete.
      let finished = false;
      reply.raw.once('finish', () => (finished = true));
      reply.raw.once('close', () => {
        state.closed = true;
        if (!finished) state.abort.abort();
        const status = finished ? reply.raw.statusCode : CLIENT_CLOSED_STATUS;
        state.record.finish(status);
        // The one place a tenant's slot is given back: every end of a response passes here.
        state.lease?.release();
        if (state.counted) {
          const outcome = state.refusal ?? (status >= 200 && status < 300 ? 'served' : 'error');
          deps.classMetrics.outcome(state.counted.priorityClass, state.counted.tenant, outcome);
        }
      });
    }
    done();
  });

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof ClientGoneError || reply.raw.headersSent) {
      reply.hijack();
      if (!reply.raw.destroyed && !reply.raw.writableEnded) reply.raw.destroy();
      return;
    }
    const failure = toFrontendError(error);
    const { status, body } = errorAnswer(failure, errorOptions);
    if ((error as { code?: unknown }).code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      // Fastify asked for `connection: close`; the client would not read our answer (refused-body.ts).
      reply.removeHeader('connection');
      discardRestOfBody(request.raw, DISCARD_MAX_BYTES);
    }
    if (failure.code === 'tenant_capped') {
      const state = states.get(request);
      if (state) state.refusal = 'tenant_capped';
      void reply.header('retry-after', String(Math.max(1, Math.ceil((failure.retryAfterMs ?? 1000) / 1000))));
    }
    if (failure.code === 'overloaded') {
      const state = states.get(request);
      if (state) state.refusal = 'overloaded';
      state?.record.rejected();
      // The workers' own estimate when they refused (whole seconds, at least 1), else the configured value.
      const retryAfterS = failure.retryAfterMs === undefined ? deps.retryAfterS : Math.max(1, Math.ceil(failure.retryAfterMs / 1000));
      void reply.header('retry-after', String(retryAfterS));
    }
    if (failure.code === 'internal') deps.logger.error('request failed', { url: request.url, error: failure.message });
    return reply.code(status).type('application/json').send(body);
  });

  app.get('/v1/models', () => ({
    object: 'list',
    data: deps.router.models().map((id) => ({ id, object: 'model', created: deps.modelsCreated, owned_by: 'dynamo-sidecar' })),
  }));

  app.post<{ Body: ChatBody }>('/v1/chat/completions', { schema: { body: CHAT_COMPLETIONS_BODY }, sse: 'manual' }, async (request, reply) =>
    answer(request, reply, chatJob(request.body), request.body),
  );
  app.post<{ Body: CompletionsBody }>('/v1/completions', { schema: { body: COMPLETIONS_BODY }, sse: 'manual' }, async (request, reply) =>
    answer(request, reply, completionsJob(request.body), request.body),
  );
  done();

  async function answer(request: FastifyRequest, reply: FastifyReply, job: CompletionJob, classFields: ClassFields): Promise<object | undefined> {
    const state = states.get(request)!;
    const { record, abort } = state;
    record.setModel(deps.router.models().includes(job.model) ? job.model : UNKNOWN_MODEL_LABEL);
    const requestClass = resolveRequestClass(request.headers, classFields, deps.defaultPriority);
    state.counted = { priorityClass: priorityClassOf(deps.thresholds.priorityScales(job.model), requestClass.priority).label, tenant: requestClass.tenant };
    admitTenant(state, requestClass.tenant);
    const prompt = await deps.prompts.admit(job.input, job.promptField, abort.signal);
    const requestId = deps.newRequestId();
    const generation = await startGeneration(deps, generationRequest(job, prompt, requestId, requestClass), record, abort.signal);
    const head = { id: idPrefix(job.endpoint) + requestId, created: Math.floor(deps.now() / 1000), model: job.model };
    const output = new OutputText(deps.tokenizer, job.stop);
    if (job.stream) {
      await streamAnswer(reply, { generation, output, shapes: new ChunkShapes(job.endpoint, head, job.includeUsage), signal: abort.signal }, errorOptions);
      return undefined;
    }
    let text = '';
    const summary = await readOutput(generation, output, (piece) => void (text += piece));
    return wholeResponse(job.endpoint, head, text, summary.finishReason, usage(generation.promptTokens, summary.completionTokens));
  }

  /** Takes the tenant's slot (429 at its cap); anonymous requests are not capped. */
  function admitTenant(state: RequestState, tenant: string | undefined): void {
    if (tenant === undefined) return;
    const admission = deps.tenants.admit(tenant);
    if (admission.kind === 'capped') {
      throw new FrontendError('tenant_capped', `this tenant has ${deps.tenants.max} requests in flight, the most allowed; retry after one ends`, {
        retryAfterMs: admission.retryAfterS * 1000,
      });
    }
    state.lease = admission.lease;
    // The response may have closed while the body was read: its 'close' has run, so release now.
    if (state.closed) {
      admission.lease.release();
      throw new ClientGoneError();
    }
  }
}

/** The worker's part of a job: its sampling fields, the admitted prompt, the request id (the job's text or ids are not kept). */
function generationRequest(job: CompletionJob, prompt: EncodedPrompt, requestId: string, requestClass: RequestClass): GenerationRequest {
  return {
    requestId,
    model: job.model,
    prompt,
    priority: requestClass.priority,
    ...(requestClass.tenant === undefined ? {} : { tenant: requestClass.tenant }),
    ...(requestClass.ttftSloMs === undefined ? {} : { ttftSloMs: requestClass.ttftSloMs }),
    ...(job.maxTokens === undefined ? {} : { maxTokens: job.maxTokens }),
    ...(job.temperature === undefined ? {} : { temperature: job.temperature }),
    ...(job.seed === undefined ? {} : { seed: job.seed }),
  };
}
