/**
 * The admin API in process, with fake requests: off (404), authentication (401, 403), GET's shape,
 * partial PUT, every refusal naming its field, and the token never in a log line or an answer.
 * The same API over a real socket is in test/integration/sidecar/system/admin-api.test.ts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { AdmissionControl, gateLimits } from '../../../../src/sidecar/admission/admission-control.js';
import { AdmissionGate } from '../../../../src/sidecar/admission/gate.js';
import { admissionSettingsOf, parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { AdminApi, parseChange } from '../../../../src/sidecar/system/admin-api.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { RetryPushback } from '../../../../src/sidecar/admission/retry-pushback.js';
import { admitting } from '../../../support/admitting.js';

const TOKEN = 'test-token-0123456789abcdef';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

function setup(token: string | null = TOKEN) {
  const settings = admissionSettingsOf(parseSidecarConfig({ engineRequestLimit: '8' }, {}));
  const { limit, queueLimit } = gateLimits(settings);
  const gate = new AdmissionGate(limit, queueLimit);
  const logger = recordingLogger();
  const changes: string[] = [];
  const control = new AdmissionControl({
    gate,
    settings,
    metrics: { admissionChanged: (source) => changes.push(source) },
    onChange: () => {},
    logger,
    pushback: new RetryPushback(settings, gate, () => 0, mulberry32(1)),
  });
  const api = new AdminApi({ token: token ?? undefined, control, gate, logger });
  const request = async (method: string, options: { auth?: string | null; body?: string; type?: string; path?: string } = {}): Promise<Answer> => {
    const headers: Record<string, string> = {};
    const auth = options.auth === undefined ? `Bearer ${TOKEN}` : options.auth;
    if (auth !== null) headers['authorization'] = auth;
    if (options.type !== undefined) headers['content-type'] = options.type;
    else if (options.body !== undefined) headers['content-type'] = 'application/json';
    const req = Object.assign(Readable.from(options.body === undefined ? [] : [Buffer.from(options.body)]), {
      method,
      url: options.path ?? '/admission',
      headers,
      socket: { remoteAddress: '127.0.0.1' },
    }) as unknown as IncomingMessage;
    const answer: Answer = { status: 0, headers: {}, body: {} };
    await new Promise<void>((resolve, reject) => {
      const res = {
        setHeader: (name: string, value: string) => void (answer.headers[name.toLowerCase()] = value),
        writeHead: (status: number, head: Record<string, string>) => {
          answer.status = status;
          for (const [k, v] of Object.entries(head)) answer.headers[k.toLowerCase()] = v;
        },
        end: (text: string) => {
          answer.body = JSON.parse(text) as Record<string, unknown>;
          resolve();
        },
      } as unknown as ServerResponse;
      api.serve(req, res).catch(reject);
    });
    return answer;
  };
  return { api, gate, control, logger, changes, request };
}

describe('admin API: on and off', () => {
  it('is off without a token: 404 saying how to turn it on, for every method', async () => {
    const { request } = setup(null);
    for (const method of ['GET', 'PUT', 'POST']) {
      const answer = await request(method, { body: '{"engine_request_limit":1}' });
      expect(answer.status).toBe(404);
      expect(answer.body['error']).toContain('--admin-token');
      expect(answer.body['error']).toContain('DYN_SIDECAR_ADMIN_TOKEN');
    }
  });

  it('handles /admission only, query string or not', () => {
    const { api } = setup();
    expect([api.handles('/admission'), api.handles('/admission?x=1'), api.handles('/admissions'), api.handles('/load'), api.handles(undefined)]).toEqual([
      true,
      true,
      false,
      false,
      false,
    ]);
  });

  it.each([
    ['no Authorization header', null],
    ['another scheme', `Basic ${TOKEN}`],
    ['Bearer without a token', 'Bearer '],
    ['a token with a space in it', `Bearer ${TOKEN} x`],
  ])('answers 401 with a Bearer challenge for %s', async (_what, auth) => {
    const { request, changes } = setup();
    const answer = await request('PUT', { auth, body: '{"engine_request_limit":1}' });
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toMatch(/^Bearer /);
    expect(changes).toEqual([]);
  });

  it('answers 403 to a wrong token (shorter, longer, one character off) and changes nothing', async () => {
    const { request, gate, logger } = setup();
    for (const wrong of [TOKEN.slice(0, -1), TOKEN + 'x', TOKEN.slice(0, -1) + 'g']) {
      const answer = await request('PUT', { auth: `Bearer ${wrong}`, body: '{"engine_request_limit":1}' });
      expect(answer.status).toBe(403);
      expect(JSON.stringify(answer.body)).not.toContain(wrong);
    }
    expect(gate.limit).toBe(8);
    expect(logger.find('admin API: request with a wrong token refused')).toHaveLength(3);
  });

  it('takes the scheme in any case', async () => {
    const { request } = setup();
    expect((await request('GET', { auth: `bearer ${TOKEN}` })).status).toBe(200);
  });

  it('answers 405 with Allow to other methods', async () => {
    const answer = await setup().request('POST', { body: '{}' });
    expect(answer.status).toBe(405);
    expect(answer.headers['allow']).toBe('GET, PUT');
  });
});

describe('admin API: GET and PUT', () => {
  it('GET: the settings by their load-event and flag names, and a read-only state', async () => {
    const { request, gate } = setup();
    gate.acquire(admitting(() => {}));
    const answer = await request('GET');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      engine_request_limit: 8,
      request_queue_limit: 16,
      request_queue_timeout_ms: 0,
      admission_mode: 'static',
      adaptive_min_limit: 1,
      first_token_limit: null,
      max_queue_wait_ms: 0,
      retry_pushback_mode: 'fixed',
      retry_pushback_ms: 250,
      retry_pushback_min_ms: 100,
      retry_pushback_max_ms: 10_000,
      state: {
        engine_request: 1,
        request_queue: 0,
        engine_request_limit_in_force: 8,
        retry_pushback_estimate_ms: 250,
        mean_slot_ms: null,
        last_change: { source: 'startup', time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown },
      },
    });
  });

  it('PUT: changes only the fields given and answers the new state, with what changed', async () => {
    const { request, gate, changes } = setup();
    const answer = await request('PUT', { body: JSON.stringify({ engine_request_limit: 3, request_queue_timeout_ms: 2000 }) });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ engine_request_limit: 3, request_queue_limit: 16, request_queue_timeout_ms: 2000, retry_pushback_ms: 250 });
    expect(answer.body['changed']).toEqual(['engine_request_limit', 'request_queue_timeout_ms']);
    expect((answer.body['state'] as { last_change: { source: string } }).last_change.source).toBe('api');
    expect(gate.limit).toBe(3);
    expect(changes).toEqual(['api']);
    const off = await request('PUT', { body: '{"engine_request_limit":null}' });
    expect(off.body['engine_request_limit']).toBeNull();
    expect(gate.limit).toBe(Infinity);
  });

  it("PUT: GET's body without its read-only state is a valid PUT body", async () => {
    const { request } = setup();
    const { state: _state, ...settings } = (await request('GET')).body;
    const answer = await request('PUT', { body: JSON.stringify({ ...settings, retry_pushback_mode: 'adaptive' }) });
    expect(answer.status).toBe(200);
    expect(answer.body['changed']).toEqual(['retry_pushback_mode']);
  });

  it.each([
    ['not JSON', '{engine_request_limit: 4}', 'body is not JSON'],
    ['an array', '[1]', 'body must be a JSON object of settings'],
    ['a number', '4', 'body must be a JSON object of settings'],
    ['no field', '{}', 'no setting given'],
    ['an unknown field', '{"engine_request_limt":4}', 'unknown field engine_request_limt; settable: engine_request_limit,'],
    ['the read-only state', '{"state":{}}', 'unknown field state (state is read-only)'],
    ['N = 0', '{"engine_request_limit":0}', 'engine_request_limit must be an integer >= 1, or null (admission off), got 0'],
    ['N as a string', '{"engine_request_limit":"4"}', 'engine_request_limit must be an integer >= 1, or null (admission off), got "4"'],
    ['N = 1.5', '{"engine_request_limit":1.5}', 'engine_request_limit must be an integer >= 1'],
    ['Q = 1', '{"request_queue_limit":1}', 'request_queue_limit must be an integer >= 2, got 1'],
    ['Q = null', '{"request_queue_limit":null}', 'request_queue_limit must be an integer >= 2, got null'],
    ['a negative pushback', '{"retry_pushback_ms":-1}', 'retry_pushback_ms must be an integer in 0..3600000, got -1'],
    ['a queue timeout over an hour', '{"request_queue_timeout_ms":3600001}', 'request_queue_timeout_ms must be an integer in 0..3600000'],
    ['F = 0', '{"first_token_limit":0}', 'first_token_limit must be an integer >= 1, or null (none), got 0'],
    ['a negative queue wait', '{"max_queue_wait_ms":-5}', 'max_queue_wait_ms must be an integer in 0..3600000, got -5'],
    ['an unknown mode', '{"retry_pushback_mode":"smart"}', 'retry_pushback_mode must be one of fixed, adaptive, got "smart"'],
    ['min above max', '{"retry_pushback_min_ms":20000}', 'the retry pushback minimum (20000 ms) is above its maximum (10000 ms)'],
  ])('PUT %s: 400 naming the problem', async (_what, body, message) => {
    const { request, gate, changes } = setup();
    const answer = await request('PUT', { body });
    expect(answer.status).toBe(400);
    expect(answer.body['error']).toContain(message);
    expect([gate.limit, gate.queueLimit]).toEqual([8, 16]);
    expect(changes).toEqual([]);
  });

  it('PUT: a body with one bad field applies none of its good ones', async () => {
    const { request, gate } = setup();
    const answer = await request('PUT', { body: '{"engine_request_limit":2,"request_queue_limit":4,"retry_pushback_ms":"fast"}' });
    expect(answer.status).toBe(400);
    expect(answer.body['error']).toContain('retry_pushback_ms');
    expect([gate.limit, gate.queueLimit]).toEqual([8, 16]);
  });

  it('PUT: refuses a body that is not JSON by its content type (415), and one too large (413)', async () => {
    const { request } = setup();
    const form = await request('PUT', { body: 'engine_request_limit=4', type: 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(415);
    expect(form.body['error']).toContain('Content-Type: application/json');
    expect((await request('PUT', { body: '{"engine_request_limit":4}', type: 'application/json; charset=utf-8' })).status).toBe(200);
    const huge = await request('PUT', { body: JSON.stringify({ engine_request_limit: 4, pad: 'x'.repeat(20_000) }) });
    expect(huge.status).toBe(413);
  });

  it('never writes the token into a log line or an answer', async () => {
    const { request, logger } = setup();
    await request('GET');
    await request('PUT', { body: '{"engine_request_limit":5}' });
    await request('PUT', { auth: `Bearer ${TOKEN}zz`, body: '{"engine_request_limit":5}' });
    await request('PUT', { auth: `Basic ${TOKEN}` });
    expect(logger.lines.length).toBeGreaterThan(0);
    expect(JSON.stringify(logger.lines)).not.toContain(TOKEN);
  });
});

describe('parseChange', () => {
  it('maps each field to its setting, null N to admission off', () => {
    expect(parseChange({ engine_request_limit: null, request_queue_limit: 2, retry_pushback_mode: 'adaptive', retry_pushback_max_ms: 0 })).toEqual({
      settings: { engineRequestLimit: undefined, requestQueueLimit: 2, retryPushbackMode: 'adaptive', retryPushbackMaxMs: 0 },
    });
    expect(parseChange({ first_token_limit: null, max_queue_wait_ms: 200 })).toEqual({ settings: { firstTokenLimit: undefined, maxQueueWaitMs: 200 } });
    expect(parseChange({ first_token_limit: 3 })).toEqual({ settings: { firstTokenLimit: 3 } });
  });
});
