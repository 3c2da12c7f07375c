// What buildFrontendApp / buildAdminApp wire: which routes, the admin switch, JSON-only bodies, no coercion, the body limit, 404s.
import { Registry } from 'prom-client';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/platform/log.js';
import { buildAdminApp, buildFrontendApp, type FrontendAppOptions } from '../../../../src/frontend/http/app.js';
import { createDefaultTokenizer } from '../../../../src/frontend/text/default-tokenizer.js';
import { FakeRouter, FakeThresholds, FakeWorkers, TEST_OPTIONS } from '../../../support/frontend-fakes.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

const NOW = 1_700_000_123_456;

function frontend(options: Partial<FrontendAppOptions> = {}) {
  const registry = new Registry();
  const workers = new FakeWorkers();
  const app = buildFrontendApp({
    router: new FakeRouter(),
    thresholds: new FakeThresholds(),
    workers,
    tokenizer: createDefaultTokenizer(),
    registry,
    logger: silentLogger,
    options: { ...TEST_OPTIONS, ...options },
    clock: { now: () => NOW, monotonic: () => 0 },
  });
  apps.push(app);
  return { app, registry, workers };
}

const chat = (app: FastifyInstance, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload: { model: 'm1', messages: [{ role: 'user', content: 'hi' }], ...body } });

describe('buildFrontendApp', () => {
  it('serves the OpenAI, admin and process routes', async () => {
    const { app } = frontend();
    for (const url of ['/v1/models', '/busy_threshold', '/live', '/ready', '/metrics']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
    expect((await chat(app)).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/v1/completions', payload: { model: 'm1', prompt: 'hi' } })).statusCode).toBe(200);
  });

  it('leaves /busy_threshold unrouted when the admin API is off', async () => {
    const { app } = frontend({ adminApi: false });
    const res = await app.inject({ method: 'GET', url: '/busy_threshold?model=m1' });
    expect(res.statusCode).toBe(404);
    const fields = { message: 'Route GET /busy_threshold not found', type: 'Not Found', code: 404 };
    expect(res.json()).toEqual({ ...fields, error: fields });
  });

  it("lists models with `created` from the app's clock, and ids from a random 32-hex request id by default", async () => {
    const { app } = frontend();
    const models = await app.inject({ method: 'GET', url: '/v1/models' });
    expect(models.json()).toEqual({ object: 'list', data: [{ id: 'm1', object: 'model', created: Math.floor(NOW / 1000), owned_by: 'dynamo-sidecar' }] });
    const ids = [(await chat(app)).json<{ id: string }>().id, (await chat(app)).json<{ id: string }>().id];
    for (const id of ids) expect(id).toMatch(/^chatcmpl-[0-9a-f]{32}$/u);
    expect(ids[0]).not.toBe(ids[1]);
  });

  it('takes JSON bodies only: text/plain is 415 like any other type', async () => {
    const { app, workers } = frontend();
    const res = await app.inject({ method: 'POST', url: '/v1/completions', headers: { 'content-type': 'text/plain' }, payload: 'hi' });
    expect(res.statusCode).toBe(415);
    expect(workers.calls).toHaveLength(0);
  });

  it('does not coerce types: a string temperature is a 400', async () => {
    const { app, workers } = frontend();
    const res = await chat(app, { temperature: '0.5' });
    expect(res.statusCode).toBe(400);
    expect(workers.calls).toHaveLength(0);
  });

  it('answers a body over the limit with 413', async () => {
    const { app } = frontend({ bodyLimitBytes: 256 });
    expect((await chat(app, { padding: 'x'.repeat(300) })).statusCode).toBe(413);
  });

  it('asks options.ready on every /ready', async () => {
    let ready = false;
    const { app } = frontend({ ready: () => (ready ? { ready: true } : { ready: false, reason: 'no worker known yet' }) });
    expect((await app.inject({ method: 'GET', url: '/ready' })).json()).toEqual({ status: 'not ready', reason: 'no worker known yet' });
    ready = true;
    expect((await app.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
  });

  it('registers the request metrics on the registry it was given and serves them at /metrics', async () => {
    const { app, registry } = frontend();
    await chat(app);
    expect(registry.getSingleMetric('dynamo_frontend_requests_total')).toBeDefined();
    expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toContain(
      'dynamo_frontend_requests_total{model="m1",endpoint="chat_completions",status="200"} 1',
    );
  });
});

describe('buildAdminApp', () => {
  it('serves /busy_threshold and nothing else', async () => {
    const router = new FakeRouter();
    const app = buildAdminApp({
      router,
      thresholds: new FakeThresholds(),
      logger: silentLogger,
      bodyLimitBytes: 1024,
      overloadStatus: 529,
      limits: TEST_OPTIONS.limits,
    });
    apps.push(app);
    expect((await app.inject({ method: 'GET', url: '/busy_threshold' })).statusCode).toBe(200);
    for (const url of ['/v1/models', '/live', '/metrics']) expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(404);
    const post = await app.inject({ method: 'POST', url: '/busy_threshold', payload: { model: 'm1', active_decode_blocks_threshold: 0.5 } });
    expect(post.json()).toMatchObject({ model: 'm1', active_decode_blocks_threshold: 0.5 });
  });
});
