/**
 * The frontend's composition root: builds the worker pool, router, thresholds, load sources,
 * metrics and the HTTP app from one FrontendConfig, and owns their start and stop. Everything is
 * created here and passed down; nothing is a module-level singleton.
 *
 *   HTTP request -> OpenAI route -> router (pool + thresholds) -> worker's sidecar (gRPC Generate)
 *   sidecars -> NATS events / WorkerLoad.Watch pushes -> pool
 */
import { Registry } from 'prom-client';
import type { Logger } from '../platform/log.js';
import { ClientTls } from '../platform/tls/client-tls.js';
import { ServerTls, type TlsDeps } from '../platform/tls/server-tls.js';
import { TlsMetrics } from '../platform/tls/tls-metrics.js';
import { buildAdminApp, buildFrontendApp } from './http/app.js';
import { StatusAssets } from '../platform/status/status-assets.js';
import { frontendStatusHub } from './status/frontend-status.js';
import type { FrontendConfig } from './frontend-config.js';
import { GrpcWorkerClients } from './generate/worker-clients.js';
import { WorkerCredentials } from './generate/worker-credentials.js';
import { WorkerRouter } from './routing/router.js';
import { ThresholdStore } from './routing/thresholds.js';
import { registerWorkerMetrics } from './routing/worker-metrics.js';
import { WorkerPool } from './routing/worker-pool.js';
import { NatsLoadSource } from './sources/nats-source.js';
import { PushLoadSource } from './sources/push-source.js';
import { PromptAdmission } from './generate/prompt-admission.js';
import { loadTokenizer, type TokenizerSpec } from './text/load-tokenizer.js';
import { INLINE_MAX_CHARS, PromptEncoder } from './text/prompt-encoder.js';
import type { PromptTokenizer } from './text/prompt-tokenizer.js';
import { TokenizerPool } from './text/tokenizer-pool.js';

export interface FrontendDeps {
  readonly logger: Logger;
  readonly now?: () => number;
  readonly random?: () => number;
}

export interface RunningFrontend {
  readonly port: number;
  /** The admin API's own port with --admin-address, else undefined (it is on `port`). */
  readonly adminPort: number | undefined;
  readonly pool: WorkerPool;
  readonly router: WorkerRouter;
  readonly registry: Registry;
  readonly tokenizer: PromptTokenizer;
  close(): Promise<void>;
}

export class NoLoadSourceError extends Error {
  override readonly name = 'NoLoadSourceError';
}

export async function startFrontend(config: FrontendConfig, deps: FrontendDeps): Promise<RunningFrontend> {
  const { logger } = deps;
  const now = deps.now ?? Date.now;
  if (config.workers.length === 0 && config.natsServers === undefined) {
    throw new NoLoadSourceError('no workers to route to: give --worker HOST:PORT (repeatable) or --nats-url (NATS_SERVER)');
  }
  const tokenizerSpec: TokenizerSpec = config.tokenizerPath === undefined ? { kind: 'default' } : { kind: 'huggingface', path: config.tokenizerPath };
  const tokenizer = await loadTokenizer(tokenizerSpec);
  // Each thread loads its own copy (a HuggingFace tokenizer.json is parsed once per thread).
  const tokenizerPool =
    config.tokenizerThreads > 0
      ? await TokenizerPool.start(tokenizerSpec, config.tokenizerThreads, {
          onThreadError: (reason) => logger.error('tokenizer thread failed; its prompt got a 500', { reason }),
        })
      : undefined;
  const prompts = new PromptAdmission(
    new PromptEncoder(tokenizer, tokenizerPool && { pool: tokenizerPool, inlineMaxChars: INLINE_MAX_CHARS[tokenizerSpec.kind] }),
    config.workerMaxMessageBytes,
  );

  const registry = new Registry();
  const { http: httpTls, workers: workersTls } = config.tls;
  const tlsDeps: TlsDeps | undefined =
    httpTls || workersTls
      ? { intervalMs: config.tls.reloadIntervalMs, logger: logger.child({ component: 'tls' }), metrics: new TlsMetrics(registry, 'dynamo_frontend') }
      : undefined;
  const workerTls = workersTls && ClientTls.load(workersTls, 'worker-client', tlsDeps!);
  const credentials = new WorkerCredentials(workerTls);
  const pool = new WorkerPool({ defaultHeartbeatMs: config.loadHeartbeatMs, leaseMs: config.overloadLeaseMs, maxWorkers: config.maxWorkers });
  const thresholds = new ThresholdStore(config.thresholds, config.priorityThresholdScale);
  const router = new WorkerRouter(
    {
      mode: config.routerMode,
      kvBlockSize: config.kvBlockSize,
      trackOutputBlocks: config.routerTrackOutputBlocks,
      maxPredictedTtftMs: config.maxPredictedTtftMs,
    },
    { pool, thresholds, now, random: deps.random ?? Math.random, logger: logger.child({ component: 'router' }) },
  );
  const nats = config.natsServers
    ? new NatsLoadSource({
        servers: config.natsServers,
        namespace: config.namespace,
        component: config.component,
        endpoint: config.endpoint,
        pool,
        now,
        logger: logger.child({ component: 'nats' }),
        security: config.natsSecurity,
      })
    : undefined;
  const push = config.workers.length
    ? new PushLoadSource({
        addresses: config.workers,
        pool,
        now,
        logger: logger.child({ component: 'worker-load' }),
        defaultHeartbeatMs: config.loadHeartbeatMs,
        credentials,
      })
    : undefined;
  registerWorkerMetrics(
    registry,
    pool,
    router,
    now,
    [nats, push].filter((s) => s !== undefined),
  );
  const sweep = setInterval(() => {
    for (const workerId of pool.sweep(now())) logger.info('worker forgotten: no load event for 10 heartbeats', { worker_id: workerId });
  }, config.loadHeartbeatMs);
  sweep.unref();

  const limits = { receiveTimeoutMs: config.httpReceiveTimeoutMs, headersTimeoutMs: config.httpHeadersTimeoutMs, maxConnections: config.httpMaxConnections };
  const adminHere = config.adminApi && config.adminAddress === undefined;
  const statusHub = frontendStatusHub({
    pool,
    thresholds,
    maxPredictedTtftMs: config.maxPredictedTtftMs,
    registry,
    admin: adminHere ? 'here' : config.adminApi ? 'elsewhere' : 'off',
    overloadStatus: config.overloadStatus,
    now,
    onError: (error) => logger.warn('status page snapshot failed', { error: error.message }),
  });
  statusHub.start();
  const workers = new GrpcWorkerClients(config.requestTimeoutMs === undefined ? { credentials } : { requestDeadlineMs: config.requestTimeoutMs, credentials });
  const app = buildFrontendApp({
    router,
    thresholds,
    workers,
    tokenizer,
    prompts,
    registry,
    logger,
    tls: httpTls && ServerTls.load(httpTls, 'http', tlsDeps!),
    status: { hub: statusHub, assets: new StatusAssets('frontend.html', ['status.js', 'frontend.js', 'status.css']) },
    options: {
      overloadStatus: config.overloadStatus,
      retryAfterS: config.retryAfterS,
      adminApi: adminHere,
      bodyLimitBytes: config.maxBodyBytes,
      limits,
      requestClasses: {
        defaultPriority: config.defaultPriority,
        tenantMaxInflight: config.tenantMaxInflight,
        metricsMaxTenants: config.metricsMaxTenants,
      },
      ready: () => (router.ready() ? { ready: true } : { ready: false, reason: pool.size === 0 ? 'no worker known yet' : 'no worker reachable' }),
    },
  });

  const admin =
    config.adminApi && config.adminAddress
      ? buildAdminApp({
          router,
          thresholds,
          logger,
          bodyLimitBytes: config.maxBodyBytes,
          overloadStatus: config.overloadStatus,
          limits,
          tls: httpTls && ServerTls.load(httpTls, 'admin', tlsDeps!),
        })
      : undefined;

  workerTls?.start();
  nats?.start();
  push?.start();
  let port: number;
  let adminPort: number | undefined;
  try {
    await app.listen({ host: config.httpHost, port: config.httpPort });
    port = (app.server.address() as { port: number }).port;
    if (admin && config.adminAddress) {
      await admin.listen({ host: config.adminAddress.host, port: config.adminAddress.port });
      adminPort = (admin.server.address() as { port: number }).port;
    }
  } catch (err) {
    clearInterval(sweep);
    statusHub.close();
    push?.close();
    await nats?.close();
    await Promise.all([app.close(), admin?.close()]);
    workers.close();
    workerTls?.close();
    await tokenizerPool?.close();
    throw err;
  }

  let closing: Promise<void> | undefined;
  return {
    port,
    adminPort,
    pool,
    router,
    registry,
    tokenizer,
    close() {
      closing ??= (async () => {
        clearInterval(sweep);
        statusHub.close();
        push?.close();
        // app.close() stops accepting and waits for requests in progress; past the grace their
        // connections are closed, which aborts them and cancels their worker calls.
        const force = setTimeout(() => app.server.closeAllConnections(), config.shutdownGraceMs);
        await Promise.all([app.close(), admin?.close()]);
        clearTimeout(force);
        workers.close();
        workerTls?.close();
        await tokenizerPool?.close();
        await nats?.close();
      })();
      return closing;
    },
  };
}
