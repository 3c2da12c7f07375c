/**
 * The frontend's HTTP server as a Fastify instance, from injected parts only (router,
 * thresholds, worker clients, tokenizer, registry, logger, clock): the composition root
 * builds those, this wires the routes. Nothing here listens or closes the parts it was given;
 * the caller calls app.listen() and, at shutdown, app.close() then closes what it built.
 *
 * Routes: OpenAI (/v1/models, /v1/completions, /v1/chat/completions), /busy_threshold (unless
 * the admin API is off), /live, /ready, /metrics, and the status page (/, /status/...) when given. Bodies are JSON only (text/plain's default
 * parser is removed, so it gets 415 like any other type); ajv does not coerce types, so
 * "temperature": "0.5" is a 400, as with OpenAI. Each listener has the timeouts and the
 * connection cap of server-limits.ts, and answers Fastify's and node's own errors in the
 * error table's shape (framework-errors.ts).
 */
import { randomUUID } from 'node:crypto';
import { Server as HttpsServer } from 'node:https';
import { fastifySSE } from '@fastify/sse';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { Logger } from '../../platform/log.js';
import { GRPC_DEFAULT_MAX_RECEIVE_BYTES } from '../../protocol/grpc/framing.js';
import type { ServerTls } from '../../platform/tls/server-tls.js';
import { FrontendMetrics } from '../frontend-metrics.js';
import { RequestClassMetrics } from '../request-class-metrics.js';
import { PromptAdmission } from '../generate/prompt-admission.js';
import type { WorkerClients } from '../generate/worker-clients.js';
import type { Router, ThresholdApi } from '../routing/contracts.js';
import { PromptEncoder } from '../text/prompt-encoder.js';
import type { PromptTokenizer } from '../text/prompt-tokenizer.js';
import { busyThresholdRoutes } from './busy-threshold-routes.js';
import type { ErrorAnswerOptions } from './error-table.js';
import { answerRootErrors, frameworkErrorOptions } from './framework-errors.js';
import { healthRoutes, type Readiness } from './health-routes.js';
import { openAiRoutes } from './openai-routes.js';
import { statusRoutes, type StatusRouteDeps } from './status-routes.js';
import { TenantInflight } from './tenant-inflight.js';
import { capConnections, droppedConnectionsCounter, serverTimeouts, type HttpLimits } from './server-limits.js';

export interface FrontendAppOptions {
  /** Status of overload answers: 529, or DYN_HTTP_OVERLOAD_STATUS_CODE. Also the body's `code`. */
  readonly overloadStatus: number;
  /** Seconds, sent as `Retry-After` with every overload answer. */
  readonly retryAfterS: number;
  /** Serve GET/POST/DELETE /busy_threshold; false (DYN_DISABLE_FRONTEND_ADMIN_API) leaves them 404. */
  readonly adminApi: boolean;
  /** Largest request body, bytes; larger gets 413. */
  readonly bodyLimitBytes: number;
  /** Timeouts for receiving a request and the connection cap of the listener. */
  readonly limits: HttpLimits;
  /** For GET /ready: 200 when ready, else 503 with the reason. Called per request. */
  ready(): Readiness;
  /** SSE comment heartbeat while a stream is idle, ms; 0 turns it off. Default 15000. */
  readonly sseHeartbeatMs?: number;
  /** Priorities and tenants (--default-priority, --tenant-max-inflight, --metrics-max-tenants). */
  readonly requestClasses: RequestClassOptions;
}

export interface RequestClassOptions {
  /** Priority of requests that give none. */
  readonly defaultPriority: number;
  /** Requests in flight per tenant; 0: no cap. */
  readonly tenantMaxInflight: number;
  /** Tenants with a metrics label of their own. */
  readonly metricsMaxTenants: number;
}

/** Plain functions, not methods: the app passes them on detached from the clock. */
export interface FrontendClock {
  /** Wall clock, ms since the epoch: `created` fields. */
  readonly now: () => number;
  /** Monotonic ms: request durations, TTFT, ITL. */
  readonly monotonic: () => number;
}

export interface FrontendAppDeps {
  readonly router: Router;
  readonly thresholds: ThresholdApi;
  readonly workers: WorkerClients;
  readonly tokenizer: PromptTokenizer;
  /** Prompt tokenizing and size checks; default: on the event loop, against gRPC's default message limit. */
  readonly prompts?: PromptAdmission;
  /** The frontend's metrics are registered here (once per registry: build one app per registry). */
  readonly registry: Registry;
  readonly logger: Logger;
  readonly options: FrontendAppOptions;
  /** Default: Date.now and performance.now. */
  readonly clock?: FrontendClock;
  /** Id of each request (gRPC request_id, and the response id after "chatcmpl-"/"cmpl-"). Default: random UUIDs. */
  readonly newRequestId?: () => string;
  /** HTTPS with this certificate, kept fresh until the app closes; undefined: HTTP. */
  readonly tls?: ServerTls | undefined;
  /** The status page and its event stream; undefined: not served. */
  readonly status?: StatusRouteDeps;
}

const SYSTEM_CLOCK: FrontendClock = { now: () => Date.now(), monotonic: () => performance.now() };

export function buildFrontendApp(deps: FrontendAppDeps): FastifyInstance {
  const { options, logger } = deps;
  const clock = deps.clock ?? SYSTEM_CLOCK;
  const errors = { overloadStatus: options.overloadStatus };
  const app = newFastify({ bodyLimitBytes: options.bodyLimitBytes, limits: options.limits, errors, logger, tls: deps.tls });
  capConnections(app.server, options.limits, droppedConnectionsCounter(deps.registry));
  void app.register(fastifySSE, { heartbeatInterval: options.sseHeartbeatMs ?? 15_000 });

  const classMetrics = new RequestClassMetrics(deps.registry, options.requestClasses.metricsMaxTenants);
  const tenants = new TenantInflight(options.requestClasses.tenantMaxInflight, clock.monotonic, {
    onCount: (tenant, count) => classMetrics.tenantCount(tenant, count),
  });
  void app.register(openAiRoutes, {
    router: deps.router,
    workers: deps.workers,
    tokenizer: deps.tokenizer,
    prompts: deps.prompts ?? new PromptAdmission(new PromptEncoder(deps.tokenizer), GRPC_DEFAULT_MAX_RECEIVE_BYTES),
    metrics: new FrontendMetrics(deps.registry, clock.monotonic),
    classMetrics,
    thresholds: deps.thresholds,
    tenants,
    defaultPriority: options.requestClasses.defaultPriority,
    logger,
    overloadStatus: options.overloadStatus,
    retryAfterS: options.retryAfterS,
    now: clock.now,
    newRequestId: deps.newRequestId ?? (() => randomUUID().replaceAll('-', '')),
    modelsCreated: Math.floor(clock.now() / 1000),
  });
  if (options.adminApi) void app.register(busyThresholdRoutes, { router: deps.router, thresholds: deps.thresholds, logger });
  void app.register(healthRoutes, { registry: deps.registry, ready: () => options.ready() });
  if (deps.status) void app.register(statusRoutes, deps.status);
  return app;
}

/** The admin API alone, for --admin-address (its own port, e.g. loopback only). */
export function buildAdminApp(
  deps: Pick<FrontendAppDeps, 'router' | 'thresholds' | 'logger' | 'tls'> & Pick<FrontendAppOptions, 'bodyLimitBytes' | 'overloadStatus' | 'limits'>,
): FastifyInstance {
  const errors = { overloadStatus: deps.overloadStatus };
  const app = newFastify({ bodyLimitBytes: deps.bodyLimitBytes, limits: deps.limits, errors, logger: deps.logger, tls: deps.tls });
  capConnections(app.server, deps.limits);
  void app.register(busyThresholdRoutes, { router: deps.router, thresholds: deps.thresholds, logger: deps.logger });
  return app;
}

interface ServerSettings {
  readonly bodyLimitBytes: number;
  readonly limits: HttpLimits;
  /** How Fastify's and node's own errors are answered (framework-errors.ts). */
  readonly errors: ErrorAnswerOptions;
  readonly logger: Logger;
  readonly tls?: ServerTls | undefined;
}

/** JSON bodies only (text/plain gets 415 like any other type); ajv does not coerce types. HTTPS (HTTP/1.1) with `tls`. */
function newFastify(settings: ServerSettings): FastifyInstance {
  const { tls } = settings;
  const timeouts = serverTimeouts(settings.limits);
  const common = {
    logger: false,
    bodyLimit: settings.bodyLimitBytes,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
    // Fastify sets the server's requestTimeout from its own option (0 unless given), after creating it.
    requestTimeout: timeouts.requestTimeout,
    ...frameworkErrorOptions(settings.errors),
  };
  // The timeouts go to node's createServer too: connectionsCheckingInterval is read only there.
  const app: FastifyInstance = tls ? Fastify({ ...common, https: { ...tls.serverOptions, ...timeouts } }) : Fastify({ ...common, http: timeouts });
  if (tls && app.server instanceof HttpsServer) {
    tls.serve(app.server);
    app.addHook('onClose', (_instance, done) => {
      tls.close();
      done();
    });
  }
  app.removeContentTypeParser('text/plain');
  answerRootErrors(app, settings.errors, settings.logger);
  return app;
}
