/**
 * The status page (static/status/, see docs/status-page.md): GET / redirects to /status, the
 * page's HTML, its script and style under /status/, and GET /status/events, the event stream
 * (503 beyond the hub's client cap). Served by the same listener as the OpenAI routes, so under
 * the same TLS; it is read-only: edits go through /busy_threshold, when that is served here.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ASSET_HEADERS, type Asset, type StatusAssets } from '../../platform/status/status-assets.js';
import type { SseHub } from '../../platform/status/sse-hub.js';

export interface StatusRouteDeps {
  readonly hub: Pick<SseHub, 'attach' | 'close'>;
  readonly assets: StatusAssets;
}

export function statusRoutes(app: FastifyInstance, deps: StatusRouteDeps, done: (err?: Error) => void): void {
  const send = (reply: FastifyReply, asset: Asset) => reply.headers(ASSET_HEADERS).type(asset.contentType).send(asset.body);
  app.get('/', (_request, reply) => reply.redirect('/status'));
  app.get('/status', (_request, reply) => send(reply, deps.assets.pageAsset()));
  app.get('/status/events', (_request, reply) => {
    reply.hijack();
    if (!deps.hub.attach(reply.raw)) {
      reply.raw.writeHead(503, { 'content-type': 'application/json', 'retry-after': '5' });
      reply.raw.end(JSON.stringify({ error: 'too many status pages open; try again later' }) + '\n');
    }
  });
  app.get('/status/:file', (request, reply) => {
    const asset = deps.assets.file((request.params as { file: string }).file);
    if (!asset) return reply.code(404).send({ error: 'no such file' });
    return send(reply, asset);
  });
  // Before the server stops accepting: open streams would otherwise hold the close until its grace ends.
  app.addHook('preClose', (done) => {
    deps.hub.close();
    done();
  });
  done();
}
