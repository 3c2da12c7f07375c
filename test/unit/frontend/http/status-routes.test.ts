/** The status routes in a bare Fastify app: the redirect, the page and its files with their headers, the stream, 503 beyond the cap, close. */
import Fastify from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { statusRoutes } from '../../../../src/frontend/http/status-routes.js';
import { StatusAssets } from '../../../../src/platform/status/status-assets.js';

function app(accept: boolean) {
  const hub = {
    attach: vi.fn((res: import('node:http').ServerResponse) => {
      if (!accept) return false;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {}\n\n');
      return true;
    }),
    close: vi.fn(),
  };
  const server = Fastify();
  void server.register(statusRoutes, { hub, assets: new StatusAssets('frontend.html', ['status.js', 'frontend.js', 'status.css']) });
  return { server, hub };
}

describe('statusRoutes', () => {
  it('redirects / to the page and serves the page and its files with a strict content policy', async () => {
    const { server } = app(true);
    const root = await server.inject('/');
    expect([root.statusCode, root.headers.location]).toEqual([302, '/status']);
    const page = await server.inject('/status');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.body).toContain('/status/frontend.js');
    expect((await server.inject('/status/frontend.js')).headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect((await server.inject('/status/status.css')).statusCode).toBe(200);
    expect((await server.inject('/status/sidecar.js')).statusCode).toBe(404);
    expect((await server.inject('/status/..%2Fpackage.json')).statusCode).toBe(404);
    await server.close();
  });

  it('hands /status/events to the hub, and answers 503 when the hub is full', async () => {
    const open = app(true);
    const stream = await open.server.inject('/status/events');
    expect([stream.statusCode, stream.body]).toEqual([200, 'data: {}\n\n']);
    await open.server.close();
    expect(open.hub.close).toHaveBeenCalledOnce();

    const full = app(false);
    const refused = await full.server.inject('/status/events');
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.json()).toEqual({ error: 'too many status pages open; try again later' });
    await full.server.close();
  });
});
