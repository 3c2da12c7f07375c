/**
 * The system HTTP port (DYN_SYSTEM_PORT): /metrics for Prometheus, /live, /ready and /health for
 * orchestrators, /load for the latest load state as JSON. Plain node:http; nothing here touches
 * the request path.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from '../log.js';

export interface Readiness {
  /** `undefined` when ready, else the reason it is not (upstream unreachable, draining). */
  notReadyReason(): string | undefined;
}

export interface SystemServerOptions {
  readonly registry: Registry;
  readonly readiness: Readiness;
  /** Body of GET /load. */
  readonly load: () => unknown;
  readonly logger: Logger;
}

export class SystemServer {
  private readonly server: Server;

  constructor(private readonly options: SystemServerOptions) {
    this.server = createServer((req, res) => {
      this.route(req, res).catch((err: Error) => {
        options.logger.error('system endpoint failed', { path: req.url, error: err.message });
        if (!res.headersSent) json(res, 500, { error: err.message });
        else res.destroy();
      });
    });
    this.server.keepAliveTimeout = 65_000;
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
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { error: 'only GET and HEAD' });
    const path = (req.url ?? '/').split('?')[0];
    switch (path) {
      case '/metrics': {
        const body = await this.options.registry.metrics();
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
