/**
 * Composition root: builds the gate, the engine connection, metrics, health, load reporting
 * (with its WorkerLoad push service), ingress and the system port from one SidecarConfig, and
 * owns their start, drain and stop. Everything is created here and passed down; nothing is a
 * module-level singleton.
 */
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { AdmissionControl, gateLimits } from './admission/admission-control.js';
import { AdmissionGate } from './admission/gate.js';
import { RejectionLog } from './admission/rejection-log.js';
import { RetryPushback } from './admission/retry-pushback.js';
import { followEngineCapacity } from './load/engine-capacity.js';
import { resolveAdvertiseAddress } from './config/advertise-address.js';
import { formatHostPort, type HostPort } from '../platform/config/host-port.js';
import { admissionSettingsOf, type SidecarConfig } from './config/sidecar-config.js';
import { WorkAdmission } from './load/call-work.js';
import { LoadReporting } from './load/load-reporting.js';
import type { Logger } from '../platform/log.js';
import { mulberry32 } from '../platform/prng.js';
import { ClientTls } from '../platform/tls/client-tls.js';
import { ServerTls, type TlsDeps } from '../platform/tls/server-tls.js';
import { TlsMetrics } from '../platform/tls/tls-metrics.js';
import { SidecarMetrics } from './metrics/sidecar-metrics.js';
import type { CallClock, CallContext, CallObserver } from './proxy/call-context.js';
import { DispatchBatch } from './proxy/dispatch-batch.js';
import { HealthService } from './proxy/health-service.js';
import { Ingress } from './proxy/ingress.js';
import { UpstreamPool } from './proxy/upstream.js';
import { AdminApi } from './system/admin-api.js';
import { SidecarStatusPage } from './system/status-page.js';
import { SystemServer } from './system/system-server.js';

const realClock: CallClock = {
  now: () => performance.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface SidecarDeps {
  readonly logger: Logger;
  /** The engine to use when the config has none (the embedded simulated engine). */
  readonly upstream?: HostPort | undefined;
  /** Engine metrics to scrape when the config names none (the embedded engine's). */
  readonly engineMetricsUrl?: string | undefined;
}

export interface RunningSidecar {
  readonly ingressPort: number;
  readonly systemPort: number;
  readonly upstreamAddress: string;
  /** host:port frontends use to reach the ingress (grpc_address in load events). */
  readonly grpcAddress: string;
  readonly gate: AdmissionGate;
  /** The live admission settings (admin API, SIGHUP). */
  readonly admission: AdmissionControl;
  readonly registry: Registry;
  readonly draining: boolean;
  /** NATS subject of the load events. */
  readonly loadSubject: string;
  /** Calls rejected and Generate output tokens seen so far (for the status line). */
  counters(): { rejected: number; outputTokens: number };
  /** Reports draining (not ready, draining load events) while still admitting calls: the first step of a drain with a delay. */
  announceDrain(): void;
  /** Stops admitting (new calls get UNAVAILABLE) and resolves when admitted calls are done or graceMs passed. */
  drain(graceMs: number): Promise<{ remaining: number }>;
  close(): Promise<void>;
}

export async function startSidecar(config: SidecarConfig, deps: SidecarDeps): Promise<RunningSidecar> {
  const { logger } = deps;
  const target = config.upstream ?? deps.upstream;
  if (!target) throw new Error('no upstream: pass --upstream HOST:PORT');

  const stateListeners = new Set<() => void>();
  const notifyState = (): void => stateListeners.forEach((listener) => listener());
  const { limit, queueLimit, firstTokenLimit } = gateLimits(config);
  const gate = new AdmissionGate(limit, queueLimit, firstTokenLimit, config.priorityStarvationLimit);
  const settings = admissionSettingsOf(config);
  const pushback = new RetryPushback(settings, gate, () => realClock.now(), mulberry32((Math.random() * 2 ** 32) >>> 0));

  const registry = new Registry();
  const { ingress: ingressTls, system: systemTls, upstream: upstreamTls } = config.tls;
  const tlsDeps: TlsDeps | undefined =
    ingressTls || systemTls || upstreamTls
      ? { intervalMs: config.tls.reloadIntervalMs, logger: logger.child({ component: 'tls' }), metrics: new TlsMetrics(registry, 'dynamo_sidecar') }
      : undefined;
  const upstreamClientTls = upstreamTls && ClientTls.load(upstreamTls, 'upstream-client', tlsDeps!);

  const { connections } = config;
  const upstream = new UpstreamPool(
    {
      target,
      connections: connections.upstreamConnections,
      pingIntervalMs: connections.upstreamPingIntervalMs,
      pingTimeoutMs: connections.upstreamPingTimeoutMs,
      keepaliveIntervalMs: connections.upstreamKeepaliveIntervalMs,
      keepaliveWithoutCalls: connections.upstreamKeepaliveWithoutCalls,
      tls: upstreamClientTls,
      now: () => realClock.now(),
    },
    logger,
  );
  let draining = false;
  let drainAnnounced = false;

  const metrics = new SidecarMetrics(
    registry,
    { gate, retryPushbackMs: () => pushback.estimateMs(), maxLabelValues: config.metricsMaxTenants },
    () => upstream.reachable,
  );
  // AdmissionControl is built on the reporting below; until it is, no call is refused for its wait.
  let queuePlaces = (): number | undefined => undefined;
  const reporting = new LoadReporting({
    config: config.load,
    gate,
    listenPort: config.listen.port,
    engine: upstream,
    defaultEngineMetricsUrl: deps.engineMetricsUrl,
    registry,
    logger,
    predictTtftMs: () => pushback.predictedTtftMs(),
    queuePlaces: () => queuePlaces(),
  });
  gate.subscribe(() => reporting.syncAdmission());
  const admission = new AdmissionControl({
    gate,
    settings,
    pushback,
    metrics,
    onChange: () => reporting.admissionChanged(),
    logger,
    limitFromEngine: config.engineRequestLimitAuto,
  });
  queuePlaces = () => admission.queuePlacesWithinWait();
  if (config.engineRequestLimitAuto) {
    followEngineCapacity(reporting.discovery, (limit) => admission.engineReported(limit), logger.child({ component: 'engine-capacity' }));
  }
  const byWork =
    config.ttftSloMs === undefined
      ? undefined
      : new WorkAdmission(config.ttftSloMs, reporting, gate, config.load.generateWire, () => realClock.now(), registry);
  if (byWork) logger.info('admission by work', { ttft_slo_ms: config.ttftSloMs, generate_wire: config.load.generateWire });
  const admissionState = (): Record<string, unknown> => ({ engine_request: gate.inEngine, request_queue: gate.queued });
  const rejectionLog = new RejectionLog(logger, admissionState);
  const observer: CallObserver = {
    rejected: (reason, callClass) => {
      rejectionLog.rejected();
      reporting.rejected({ untilAdmittable: reason !== 'queue_full' && reason !== 'displaced', callClass });
    },
    dispatched: (headers) => reporting.tap(headers),
    slotReleased: (heldMs) => admission.pushback.slotHeld(heldMs),
    firstToken: (afterMs) => admission.firstTokenAfter(afterMs),
  };

  const context: CallContext = {
    gate,
    upstream,
    metrics,
    retryPushbackMs: () => admission.retryPushbackMs(),
    queueRefusalMs: (deadlineLeftMs, callClass) => admission.queueRefusalMs(deadlineLeftMs, callClass),
    get queueTimeoutMs() {
      return admission.queueTimeoutMs;
    },
    clock: realClock,
    scheduleDispatch: new DispatchBatch().schedule,
    logger,
    observer,
    ...(byWork && { work: byWork.work }),
  };
  const notReadyReason = (): string | undefined =>
    draining || drainAnnounced ? 'worker draining' : upstream.reachable ? undefined : upstream.unreachableReason;
  const health = new HealthService({
    serving: () => notReadyReason() === undefined,
    onChange: (listener) => {
      stateListeners.add(listener);
      return () => stateListeners.delete(listener);
    },
  });
  upstream.onReachabilityChange(notifyState);

  const ingress = new Ingress({
    context,
    services: [health, reporting.watchService],
    isDraining: () => draining,
    defaultPriority: config.defaultPriority,
    maxConcurrentStreams: connections.maxConcurrentStreams,
    idleTimeoutMs: connections.idleTimeoutMs,
    handshakeTimeoutMs: connections.handshakeTimeoutMs,
    now: () => realClock.now(),
    logger,
    tls: ingressTls && ServerTls.load(ingressTls, 'ingress', tlsDeps!),
  });
  const load = config.load;
  const statusPage = new SidecarStatusPage({
    registry,
    gate,
    control: admission,
    adminApi: config.adminToken !== undefined,
    engine: () => ({
      address: upstream.address,
      reachable: upstream.reachable,
      reason: upstream.reachable ? undefined : upstream.unreachableReason,
      loadSource: `${load.engineLoadSource}${load.engineLoadSource === 'traffic' ? '' : ` every ${load.scrapeIntervalMs} ms`} (${load.generateWire})`,
    }),
    ranks: () => reporting.current(),
    draining: () => draining || drainAnnounced,
    onError: (error) => logger.warn('status page snapshot failed', { error: error.message }),
  });
  const system = new SystemServer({
    registry,
    page: statusPage,
    readiness: { notReadyReason },
    load: () => ({
      subject: reporting.subject,
      upstream_reachable: upstream.reachable,
      // What the engine told about itself (snake_case, as the rest of /load); flags win where given.
      engine: { protocol: config.load.generateWire, learned: snakeCaseKeys(reporting.discovery.known) },
      ranks: reporting.current(),
      ...(byWork && { admission_by_work: byWork.view() }),
    }),
    admin: new AdminApi({ token: config.adminToken, control: admission, gate, logger: logger.child({ component: 'admin-api' }) }),
    logger,
    metricsCacheMs: config.metricsCacheMs,
    idleTimeoutMs: connections.idleTimeoutMs,
    handshakeTimeoutMs: connections.handshakeTimeoutMs,
    tls: systemTls && ServerTls.load(systemTls, 'system', tlsDeps!),
  });

  upstreamClientTls?.start();
  upstream.start();
  let ingressPort: number;
  let systemPort: number;
  let grpcAddress: string;
  try {
    ingressPort = await ingress.listen(config.listen);
    // Before anything is published or any watch is served: events carry the bound port.
    grpcAddress = formatHostPort(resolveAdvertiseAddress(config.advertiseAddress, config.listen.host, ingressPort));
    reporting.bound(grpcAddress, ingressPort);
    systemPort = await system.listen(config.systemHost, config.systemPort);
  } catch (err) {
    upstreamClientTls?.close();
    await Promise.all([ingress.close(0), system.close(), upstream.close(), reporting.close()]);
    throw err;
  }
  reporting.start();
  statusPage.start();

  return {
    ingressPort,
    systemPort,
    upstreamAddress: upstream.address,
    grpcAddress,
    gate,
    admission,
    registry,
    get draining() {
      return draining;
    },
    loadSubject: reporting.subject,
    counters: () => ({ rejected: rejectionLog.total, outputTokens: reporting.outputTokens }),
    announceDrain() {
      if (draining || drainAnnounced) return;
      drainAnnounced = true;
      notifyState();
      reporting.setDraining();
      logger.info('draining announced: reported not ready, still admitting calls until the drain delay is over', admissionState());
    },
    async drain(graceMs) {
      if (!draining) {
        draining = true;
        notifyState();
        reporting.setDraining();
        logger.info('draining: admitting no new calls', { ...admissionState(), grace_ms: graceMs });
      }
      // Until every admitted call's answer is delivered, not only until the engine is done with it.
      await ingress.openCalls.settled(graceMs);
      return { remaining: ingress.openCalls.size };
    },
    async close() {
      rejectionLog.close();
      statusPage.close();
      await Promise.all([ingress.close(), system.close()]);
      upstreamClientTls?.close();
      await Promise.all([upstream.close(), reporting.close()]);
    },
  };
}

function snakeCaseKeys(object: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(object)) out[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
  return out;
}
