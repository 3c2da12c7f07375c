/**
 * The system HTTP port (DYN_SYSTEM_PORT; HTTPS with --system-tls-cert): /metrics for Prometheus, /live, /ready and /health for
 * orchestrators, /load for the latest load state as JSON. Plain node:http; nothing here touches
 * the request path, and nothing here may cost it much either:
 *
 * - /metrics is rendered at most once per `metricsCacheMs` (RenderCache); scrapes in between,
 *   and concurrent ones, share that text. A scrape flood costs one render per interval.
 * - A connection with no request in progress is closed after `idleTimeoutMs` (0 = never): the
 *   keep-alive timeout after a response, and the socket inactivity timeout while a response is
 *   stuck (a reader that stopped reading).
 * - A request's headers must be complete within `handshakeTimeoutMs` from its first byte, or
 *   from the connection's start for the first request (slowloris); node answers 408 and closes.
 *   GET and HEAD carry no body, so the whole request gets the same bound.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Registry } from 'prom-client';
import { DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS } from '../config/sidecar-config.js';
import type { Logger } from '../../platform/log.js';
import { RenderCache } from '../../platform/metrics/render-cache.js';
import type { ServerTls } from '../../platform/tls/server-tls.js';

/** node:http's HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER, added to keepAliveTimeout. */
const NODE_KEEP_ALIVE_BUFFER_MS = 1000;

export interface Readiness {
  /** `undefined` when ready, else the reason it is not (upstream unreachable, draining). */
  notReadyReason(): string | undefined;
}

/** Routes served before the system server's own (the admin API: admin-api.ts), any method. */
export interface SystemRoute {
  handles(url: string | undefined): boolean;
  serve(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

export interface SystemServerOptions {
  readonly registry: Registry;
  /** The admin API; it answers 404 itself while turned off. */
  readonly admin?: SystemRoute;
  /** The status page (/, /status/...: status-page.ts). */
  readonly page?: SystemRoute;
  readonly readiness: Readiness;
  /** Body of GET /load. */
  readonly load: () => unknown;
  readonly logger: Logger;
  /** Minimum time between two /metrics renders (--metrics-cache-ms); 0: every scrape renders (concurrent ones share one render). */
  readonly metricsCacheMs: number;
  /** Close connections idle this long; 0 = never. Default DEFAULT_IDLE_TIMEOUT_MS. */
  readonly idleTimeoutMs?: number;
  /** A request's headers must be complete within this. Default DEFAULT_HANDSHAKE_TIMEOUT_MS. */
  readonly handshakeTimeoutMs?: number;
  /** Monotonic clock for the metrics cache; injected for tests. */
  readonly now?: () => number;
  /** HTTPS with this certificate, kept fresh (--system-tls-cert); undefined: HTTP. */
  readonly tls?: ServerTls | undefined;
}

const FIRST_REQUEST_TIMER = Symbol('dynamo-sidecar.first-request-timer');
type SocketWithTimer = Socket & { [FIRST_REQUEST_TIMER]?: NodeJS.Timeout };

export class SystemServer {
  private readonly server: Server;
  private readonly metrics: RenderCache;

  constructor(private readonly options: SystemServerOptions) {
    const { registry } = options;
    this.metrics = new RenderCache(() => registry.metrics(), { minIntervalMs: options.metricsCacheMs, now: options.now });
    const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    const handshakeTimeoutMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
    const serverOptions = {
      headersTimeout: handshakeTimeoutMs,
      requestTimeout: handshakeTimeoutMs,
      // Node checks the two timeouts above only this often (default 30 s): check often enough
      // that a slow-drip connection is closed close to its deadline.
      connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(handshakeTimeoutMs / 4))),
      // Node waits keepAliveTimeout plus a fixed 1 s buffer after a response; subtract it so the
      // connection closes at the configured idle time (idle timeouts under 1 s act as about 1 s).
      keepAliveTimeout: idleTimeoutMs === 0 ? 0 : Math.max(1, idleTimeoutMs - NODE_KEEP_ALIVE_BUFFER_MS),
    };
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      this.route(req, res).catch((err: Error) => {
        options.logger.error('system endpoint failed', { path: req.url, error: err.message });
        if (!res.headersSent) json(res, 500, { error: err.message });
        else res.destroy();
      });
    };
    if (options.tls) {
      // The TLS handshake gets the handshake timeout; the request timers below start after it.
      const server = createHttpsServer({ ...options.tls.serverOptions, ...serverOptions, handshakeTimeout: handshakeTimeoutMs }, handler);
      options.tls.serve(server);
      this.server = server;
    } else {
      this.server = createServer(serverOptions, handler);
    }
    // Inactivity on a socket whose request is in progress, e.g. a scrape whose reader stopped reading.
    this.server.timeout = idleTimeoutMs;
    // A socket that never starts a request is covered by none of node's timeouts (headersTimeout
    // starts with the first byte; server.timeout is kept from firing by the frequent connection
    // checks above): it must start one within the handshake timeout.
    // With TLS the request's socket is the TLS socket of 'secureConnection', not the TCP one of 'connection'.
    this.server.on(options.tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      const timer = setTimeout(() => socket.destroy(), handshakeTimeoutMs).unref();
      (socket as SocketWithTimer)[FIRST_REQUEST_TIMER] = timer;
      socket.once('close', () => clearTimeout(timer));
    });
    this.server.on('request', (req: IncomingMessage) => clearTimeout((req.socket as SocketWithTimer)[FIRST_REQUEST_TIMER]));
  }

  /** /metrics renders so far (each one ran every collector once). */
  get metricsRenders(): number {
    return this.metrics.renders;
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  close(): Promise<void> {
    this.options.tls?.close();
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.options.admin?.handles(req.url)) return this.options.admin.serve(req, res);
    if (this.options.page?.handles(req.url)) return this.options.page.serve(req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'only GET and HEAD' });
    const path = (req.url ?? '/').split('?')[0];
    switch (path) {
      case '/metrics': {
        const body = await this.metrics.text();
        res.writeHead(200, { 'content-type': this.options.registry.contentType });
        res.end(body);
        return;
      }
      case '/live':
        return json(res, 200, { status: 'live' });
      case '/ready':
      case '/health': {
        const reason = this.options.readiness.notReadyReason();
        return reason === undefined ? json(res, 200, { status: 'ready' }) : json(res, 503, { status: 'not_ready', reason });
      }
      case '/load':
        return json(res, 200, this.options.load());
      default:
        return json(res, 404, { error: `no such endpoint ${path}; try /metrics /live /ready /health /load` });
    }
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body) + '\n');
}
