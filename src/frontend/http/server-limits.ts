/**
 * What one client may hold of an HTTP listener, as node's own http.Server settings. Fastify 5
 * sets requestTimeout 0 unless told otherwise, which turns off node's 300 s default: a body
 * declared long and sent a byte a second held its connection for ever.
 *
 * - receiveTimeoutMs, node's requestTimeout: the time to receive a whole request, headers and
 *   body. It stops once the request has arrived, so it never cuts an answer (a long SSE
 *   stream included).
 * - headersTimeoutMs, node's headersTimeout: the same for the headers alone (slow headers, or a
 *   connection that sends nothing). An idle keep-alive connection is keepAliveTimeout's.
 * - maxConnections, node's maxConnections: connections beyond it are closed at accept,
 *   unanswered (node's 'drop'). Global, not per client address: behind a load balancer or an
 *   ingress every client has the same one.
 *
 * Either timeout makes node emit clientError, answered 408 by framework-errors.ts.
 */
import type { Server } from 'node:net';
import { Counter, type Registry } from 'prom-client';

export interface HttpLimits {
  /** 0: none. */
  readonly receiveTimeoutMs: number;
  /** 0: none; at most receiveTimeoutMs when both are set (node refuses more). */
  readonly headersTimeoutMs: number;
  /** 0: no cap. */
  readonly maxConnections: number;
}

/** The timeouts as http.createServer / https.createServer options. */
export function serverTimeouts(limits: HttpLimits): { requestTimeout: number; headersTimeout: number; connectionsCheckingInterval?: number } {
  const timeouts = { requestTimeout: limits.receiveTimeoutMs, headersTimeout: limits.headersTimeoutMs };
  const shortest = Math.min(...[limits.receiveTimeoutMs, limits.headersTimeoutMs].filter((ms) => ms > 0));
  if (!Number.isFinite(shortest)) return timeouts;
  // node looks for expired requests only every connectionsCheckingInterval (30 s by default), so
  // a 60 s timeout would cut at up to 90 s; a quarter of the shortest timeout, at most 1 s, keeps
  // the cut within that of its time.
  return { ...timeouts, connectionsCheckingInterval: Math.max(1, Math.min(1000, Math.floor(shortest / 4))) };
}

/** Caps the listener's connections; `dropped` counts the ones refused. */
export function capConnections(server: Server, limits: HttpLimits, dropped?: Counter): void {
  if (limits.maxConnections <= 0) return;
  server.maxConnections = limits.maxConnections;
  if (dropped) server.on('drop', () => dropped.inc());
}

/** The counter of connections refused beyond maxConnections, on `registry`. */
export function droppedConnectionsCounter(registry: Registry): Counter {
  return new Counter({
    name: 'dynamo_frontend_http_connections_dropped_total',
    help: 'Client connections closed at accept, unanswered, because the HTTP listener had --http-max-connections open.',
    registers: [registry],
  });
}
