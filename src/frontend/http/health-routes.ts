/**
 * Process endpoints: GET /live (200 while the process runs), GET /ready (200 when the
 * composition root says the frontend can serve, else 503 with its reason), GET /metrics
 * (the injected prom-client registry, in the registry's own content type).
 */
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

export interface Readiness {
  readonly ready: boolean;
  readonly reason?: string;
}

export interface HealthDeps {
  readonly registry: Registry;
  ready(): Readiness;
}

export function healthRoutes(app: FastifyInstance, deps: HealthDeps, done: (err?: Error) => void): void {
  app.get('/live', () => ({ status: 'live' }));

  app.get('/ready', (_request, reply) => {
    const state = deps.ready();
    if (state.ready) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready', reason: state.reason ?? 'not ready' });
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await deps.registry.metrics();
    return reply.type(deps.registry.contentType).send(text);
  });
  done();
}
