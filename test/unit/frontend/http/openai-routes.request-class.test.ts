/**
 * The OpenAI routes with request classes: priority and tenant resolved from headers and body,
 * sent to the router and on every attempt's metadata; 400 for bad values; the tenant cap's 429
 * with Retry-After; a tenant's in-flight count back to 0 however its response ends (done,
 * worker failure, 529, client gone mid-stream or while waiting); per-class and per-tenant outcomes.
 */
import { request as httpRequest, type ClientRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { fails, hangs, metricValue, OVERLOAD_DETAILS, streams, target, testApp, type FakeCall, type TestApp } from '../../../support/frontend-fakes.js';
import { waitFor } from '../../../support/wait.js';

let t: TestApp;
let clients: ClientRequest[] = [];
afterEach(async () => {
  for (const c of clients) c.destroy();
  clients = [];
  await t?.app.close();
});

const classes = (tenantMaxInflight = 0, defaultPriority = 0) => ({
  options: { requestClasses: { defaultPriority, tenantMaxInflight, metricsMaxTenants: 20 } },
});

const chat = (body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload: { model: 'm1', messages: [{ role: 'user', content: 'hi' }], ...body } });
const completion = (body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url: '/v1/completions', headers, payload: { model: 'm1', prompt: 'hi', ...body } });

const inflight = (tenant: string) => metricValue(t.registry, 'dynamo_frontend_tenant_inflight_requests', { tenant });
const tenantOutcome = (tenant: string, outcome: string) => metricValue(t.registry, 'dynamo_frontend_tenant_requests_total', { tenant, outcome });
const classOutcome = (priority_class: string, outcome: string) =>
  metricValue(t.registry, 'dynamo_frontend_priority_class_requests_total', { priority_class, outcome });

describe('priority and tenant', () => {
  it('the x-request-priority header wins over the body; both reach the router and the worker call', async () => {
    t = testApp(classes());
    expect((await chat({ priority: 3 }, { 'x-request-priority': '-2', 'x-tenant-id': 'team-a' })).statusCode).toBe(200);
    expect((await completion({ priority: 3, user: 'alice' })).statusCode).toBe(200);
    expect(t.router.routePriorities).toEqual([-2, 3]);
    expect(t.workers.calls.map((c) => c.callClass)).toEqual([
      { priority: -2, tenant: 'team-a' },
      { priority: 3, tenant: 'alice' },
    ]);
  });

  it('a request that gives no priority gets --default-priority, sent on the call all the same', async () => {
    t = testApp(classes(0, 7));
    expect((await chat()).statusCode).toBe(200);
    expect(t.router.routePriorities).toEqual([7]);
    expect(t.workers.calls[0]!.callClass).toEqual({ priority: 7 });
  });

  it('every attempt carries the class: the retry after a refusal is routed with the same priority', async () => {
    t = testApp(classes());
    t.router.targets = [target('1'), target('2')];
    t.workers.scripts.set('1', fails(GrpcStatus.RESOURCE_EXHAUSTED));
    expect((await chat({}, { 'x-request-priority': '9', 'x-tenant-id': 'team-a' })).statusCode).toBe(200);
    expect(t.router.routePriorities).toEqual([9, 9]);
    expect(t.workers.calls.map((c) => c.callClass)).toEqual([
      { priority: 9, tenant: 'team-a' },
      { priority: 9, tenant: 'team-a' },
    ]);
  });

  it.each([
    [{ 'x-request-priority': 'urgent' }, {}, 'header x-request-priority: priority must be an integer'],
    [{ 'x-request-priority': '99999999999' }, {}, 'header x-request-priority'],
    [{}, { priority: 1.5 }, 'body/priority must be integer'],
    [{}, { priority: 2 ** 31 }, 'body/priority must be <= 2147483647'],
    [{}, { priority: '1' }, 'body/priority must be integer'],
    [{ 'x-tenant-id': 'two words' }, {}, 'header x-tenant-id: tenant must be visible ASCII'],
    [{}, { user: '' }, 'body/user: tenant must not be empty'],
    [{}, { user: 42 }, 'body/user must be string'],
  ])('answers %j %j with a 400 in the OpenAI error shape naming it, and calls no worker', async (headers, body, message) => {
    t = testApp(classes());
    const res = await chat(body, headers);
    expect(res.statusCode).toBe(400);
    const json = res.json<{ message: string; error: { message: string; type: string; code: number } }>();
    expect(json.error).toEqual({ message: expect.stringContaining(message), type: 'BadRequest', code: 400 });
    expect(t.workers.calls).toHaveLength(0);
  });
});

describe('the tenant cap (--tenant-max-inflight)', () => {
  it('answers 429 rate_limit_exceeded with Retry-After at the cap; other tenants and anonymous requests go through', async () => {
    t = testApp(classes(1));
    t.workers.defaultScript = hangs;
    await listen();
    send({ stream: true }, { 'x-tenant-id': 'team-a' });
    await waitFor(() => t.workers.calls.length === 1, 'the first call of team-a');
    const capped = await chat({}, { 'x-tenant-id': 'team-a' });
    expect(capped.statusCode).toBe(429);
    expect(capped.headers['retry-after']).toBe('1');
    const json = capped.json<{ error: { type: string; code: number; message: string } }>();
    expect(json.error).toMatchObject({ type: 'rate_limit_exceeded', code: 429 });
    expect(json.error.message).toContain('1 requests in flight');
    // The body's user is the same tenant as the header's.
    expect((await completion({ user: 'team-a' })).statusCode).toBe(429);
    expect(t.workers.calls).toHaveLength(1);
    t.workers.defaultScript = streams([1]);
    expect((await chat({}, { 'x-tenant-id': 'team-b' })).statusCode).toBe(200);
    expect((await chat()).statusCode).toBe(200);
    expect((await chat()).statusCode).toBe(200);
    expect(await inflight('team-a')).toBe(1);
    expect(await tenantOutcome('team-a', 'tenant_capped')).toBe(2);
    expect(await classOutcome('default', 'tenant_capped')).toBe(2);
  });

  it('never leaks a slot: done, worker failure, 529, 404 and bad requests each give it back (or never take it)', async () => {
    t = testApp(classes(1));
    const as = { 'x-tenant-id': 'team-a' };
    const again = async (): Promise<void> => {
      expect(await inflight('team-a')).toBe(0);
    };
    expect((await chat({}, as)).statusCode).toBe(200);
    await again();
    t.workers.defaultScript = fails(GrpcStatus.INTERNAL);
    expect((await chat({}, as)).statusCode).toBe(502);
    await again();
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    expect((await chat({ stream: true }, as)).statusCode).toBe(529);
    await again();
    t.router.decide = undefined;
    expect((await chat({ model: 'ghost' }, as)).statusCode).toBe(404);
    await again();
    expect((await chat({ n: 2 }, as)).statusCode).toBe(400);
    expect((await chat({}, { ...as, 'x-request-priority': 'x' })).statusCode).toBe(400);
    t.workers.defaultScript = streams([1, 2]);
    expect((await chat({}, as)).statusCode).toBe(200);
    await again();
    expect(await tenantOutcome('team-a', 'served')).toBe(2);
    expect(await tenantOutcome('team-a', 'overloaded')).toBe(1);
    expect(await tenantOutcome('team-a', 'error')).toBe(2);
  });

  it('gives the slot back when the client leaves mid-stream, and when it leaves while waiting for its first token', async () => {
    t = testApp(classes(1));
    t.workers.defaultScript = (call) => void setTimeout(() => chunk(call, 1), 0);
    await listen();
    const streaming = send({ stream: true }, { 'x-tenant-id': 'team-a' });
    await waitFor(() => streaming.received.text.includes('"content"'), 'the first token at the client');
    expect(await inflight('team-a')).toBe(1);
    streaming.client.destroy();
    await waitFor(async () => (await inflight('team-a')) === 0, 'the slot back after the client left mid-stream');
    await waitFor(() => t.workers.calls[0]!.cancelled, 'the worker call cancelled');

    t.workers.defaultScript = hangs;
    const waiting = send({}, { 'x-tenant-id': 'team-a' });
    await waitFor(() => t.workers.calls.length === 2, 'the second call');
    expect((await chat({}, { 'x-tenant-id': 'team-a' })).statusCode).toBe(429);
    waiting.client.destroy();
    await waitFor(async () => (await inflight('team-a')) === 0, 'the slot back after the client left while waiting');
    t.workers.defaultScript = streams([1]);
    expect((await chat({}, { 'x-tenant-id': 'team-a' })).statusCode).toBe(200);
    expect(await tenantOutcome('team-a', 'error')).toBe(2);
  });

  it('is off with 0: a tenant is counted in flight but never refused', async () => {
    t = testApp(classes(0));
    t.workers.defaultScript = hangs;
    await listen();
    for (let i = 0; i < 5; i++) send({}, { 'x-tenant-id': 'team-a' });
    await waitFor(() => t.workers.calls.length === 5, 'five calls of one tenant');
    expect(await inflight('team-a')).toBe(5);
    for (const c of clients) c.destroy();
    await waitFor(async () => (await inflight('team-a')) === 0, 'every slot back');
  });
});

describe('per-class outcomes', () => {
  it("counts each request under its model's class key, `default` below every key", async () => {
    t = testApp(classes());
    t.thresholds.setPriorityScales('m1', [
      { priority: 1, scale: 0.8 },
      { priority: 5, scale: 0.5 },
    ]);
    await chat({ priority: 0 });
    await chat({ priority: 3 });
    await chat({ priority: 6 });
    t.router.decide = () => ({ kind: 'overloaded', details: OVERLOAD_DETAILS });
    await chat({}, { 'x-request-priority': '7' });
    expect(await classOutcome('default', 'served')).toBe(1);
    expect(await classOutcome('1', 'served')).toBe(1);
    expect(await classOutcome('5', 'served')).toBe(1);
    expect(await classOutcome('5', 'overloaded')).toBe(1);
  });
});

async function listen(): Promise<number> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

/** Sends a chat request over a real socket (so the test can leave); `received` is kept up to date. */
function send(body: Record<string, unknown>, headers: Record<string, string>): { client: ClientRequest; received: { text: string } } {
  const { port } = t.app.server.address() as AddressInfo;
  const received = { text: '' };
  const payload = JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], ...body });
  const client = httpRequest(
    { host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', ...headers } },
    (res) => {
      res.on('data', (d: Buffer) => (received.text += d.toString()));
      res.on('error', () => {});
    },
  );
  client.on('error', () => {});
  client.end(payload);
  clients.push(client);
  return { client, received };
}

const chunk = (call: FakeCall, id: number) => call.send({ chunk: { token_ids: [id], prompt_tokens: 0, completion_tokens: 1, cached_tokens: 0 } });
