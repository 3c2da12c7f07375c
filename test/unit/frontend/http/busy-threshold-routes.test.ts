// /busy_threshold with Dynamo's semantics and statuses, plus DELETE; and the admin API switch.
import { afterEach, describe, expect, it } from 'vitest';
import { testApp, type TestApp } from '../../../support/frontend-fakes.js';

let t: TestApp;
afterEach(async () => {
  await t?.app.close();
});

const NULLS = { active_decode_blocks_threshold: null, active_prefill_tokens_threshold: null, active_prefill_tokens_threshold_frac: null };
const post = (payload: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  t.app.inject({ method: 'POST', url: '/busy_threshold', headers, payload: typeof payload === 'string' ? payload : JSON.stringify(payload) });

describe('GET /busy_threshold', () => {
  it('lists every served model with its thresholds (null = off) and the checks that cannot fire', async () => {
    t = testApp();
    t.router.modelList = ['m1', 'm2'];
    t.thresholds.values.set('m2', { ...NULLS, active_decode_blocks_threshold: 0.85 });
    t.router.inactive = [{ check: 'active_decode_blocks_threshold', reason: 'kv_total_blocks unknown', workers: ['7'] }];
    const res = await t.app.inject({ method: 'GET', url: '/busy_threshold' });
    expect(res.statusCode).toBe(200);
    const diagnostics = { inactive_checks: t.router.inactive };
    expect(res.json()).toEqual({
      thresholds: [
        { model: 'm1', ...NULLS, diagnostics },
        { model: 'm2', ...NULLS, active_decode_blocks_threshold: 0.85, diagnostics },
      ],
    });
  });
});

describe('POST /busy_threshold', () => {
  it('reads when every threshold is null or absent', async () => {
    t = testApp();
    t.thresholds.values.set('m1', { ...NULLS, active_prefill_tokens_threshold: 100 });
    const read = await post({ model: 'm1', active_decode_blocks_threshold: null });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual({ model: 'm1', ...NULLS, active_prefill_tokens_threshold: 100, diagnostics: { inactive_checks: [] } });
  });

  it('answers a read for a model with no workers with 404, as a set and a DELETE for it (Dynamo answers 200 and nulls)', async () => {
    t = testApp();
    const read = await post({ model: 'ghost' });
    expect(read.statusCode).toBe(404);
    expect(read.json()).toEqual({ error: "Model 'ghost' not found. Thresholds can only be read for discovered models." });
    expect((await post({ model: 'ghost', active_prefill_tokens_threshold: 10 })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'DELETE', url: '/busy_threshold?model=ghost&check=active_decode_blocks_threshold' })).statusCode).toBe(404);
    expect(t.thresholds.values.has('ghost')).toBe(false);
  });

  it('sets only the non-null fields given and answers the full entry', async () => {
    t = testApp();
    t.thresholds.values.set('m1', { ...NULLS, active_prefill_tokens_threshold: 100 });
    const res = await post({
      model: 'm1',
      active_decode_blocks_threshold: 0.85,
      active_prefill_tokens_threshold: null,
      active_prefill_tokens_threshold_frac: 1.5,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      model: 'm1',
      active_decode_blocks_threshold: 0.85,
      active_prefill_tokens_threshold: 100,
      active_prefill_tokens_threshold_frac: 1.5,
      diagnostics: { inactive_checks: [] },
    });
    expect(t.thresholds.get('m1').active_decode_blocks_threshold).toBe(0.85);
  });

  it('refuses to set thresholds for a model with no workers: 404 with Dynamo message', async () => {
    t = testApp();
    const res = await post({ model: 'ghost', active_prefill_tokens_threshold: 10 });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: "Model 'ghost' not found. Thresholds can only be set for discovered models." });
  });

  it('answers a decode threshold outside 0..1 and a negative frac with 400', async () => {
    t = testApp();
    const decode = await post({ model: 'm1', active_decode_blocks_threshold: 1.5 });
    expect(decode.statusCode).toBe(400);
    expect(decode.json()).toEqual({ error: 'active_decode_blocks_threshold must be between 0.0 and 1.0, got 1.5' });
    expect((await post({ model: 'm1', active_decode_blocks_threshold: -0.1 })).statusCode).toBe(400);
    const frac = await post({ model: 'm1', active_prefill_tokens_threshold_frac: -1 });
    expect(frac.statusCode).toBe(400);
    expect(frac.json<{ error: string }>().error).toMatch(/^active_prefill_tokens_threshold_frac must be a finite number >= 0, got -1$/u);
    const infinite = await post('{"model":"m1","active_prefill_tokens_threshold_frac":1e400}');
    expect(infinite.statusCode).toBe(400);
    expect(t.thresholds.values.size).toBe(0);
  });

  it('answers wrong types and a missing model with 422', async () => {
    t = testApp();
    for (const body of [
      { model: 'm1', active_prefill_tokens_threshold: -1.0 },
      { model: 'm1', active_prefill_tokens_threshold: 1.5 },
      { model: 'm1', active_decode_blocks_threshold: '0.5' },
      { model: 'm1', active_prefill_tokens_threshold_frac: true },
      { active_prefill_tokens_threshold: 10 },
      { model: 7 },
      [1, 2],
    ]) {
      const res = await post(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(422);
      expect(res.json<{ error: string }>().error).toMatch(/^Failed to deserialize the JSON body/u);
    }
    expect(t.thresholds.values.size).toBe(0);
  });

  it('answers a missing or non-JSON content type with 415, bad JSON with 400, a body over the limit with 413, all as {"error"}', async () => {
    t = testApp({ options: { bodyLimitBytes: 256 } });
    const missing = await t.app.inject({ method: 'POST', url: '/busy_threshold' });
    expect(missing.statusCode).toBe(415);
    expect(missing.json()).toEqual({ error: expect.any(String) });
    const missingWithBody = await post('{"model":"m1"}', {});
    expect(missingWithBody.statusCode).toBe(415);
    expect((await post('{"model":"m1"}', { 'content-type': 'text/plain' })).statusCode).toBe(415);
    const bad = await post('{"model":');
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ error: expect.any(String) });
    const big = await post({ model: 'm'.repeat(300) });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual({ error: expect.any(String) });
  });
});

describe('DELETE /busy_threshold', () => {
  it('turns one check off for a served model and answers the entry', async () => {
    t = testApp();
    t.thresholds.values.set('m1', { active_decode_blocks_threshold: 0.9, active_prefill_tokens_threshold: 100, active_prefill_tokens_threshold_frac: null });
    const res = await t.app.inject({ method: 'DELETE', url: '/busy_threshold?model=m1&check=active_decode_blocks_threshold' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ model: 'm1', active_decode_blocks_threshold: null, active_prefill_tokens_threshold: 100 });
    expect(t.thresholds.get('m1').active_decode_blocks_threshold).toBeNull();
  });

  it('ignores a body, whatever its type: `Content-Type: application/json` with no body is served as no body at all', async () => {
    t = testApp();
    const url = '/busy_threshold?model=m1&check=active_decode_blocks_threshold';
    for (const [headers, payload] of [
      [{ 'content-type': 'application/json' }, ''],
      [{ 'content-type': 'application/json' }, '{"model":"m1"}'],
      [{ 'content-type': 'application/json' }, '{not json'],
      [{ 'content-type': 'text/plain' }, 'x'],
      [{}, ''],
    ] as const) {
      t.thresholds.values.set('m1', { ...NULLS, active_decode_blocks_threshold: 0.9 });
      const res = await t.app.inject({ method: 'DELETE', url, headers, payload });
      expect(res.statusCode, JSON.stringify([headers, payload])).toBe(200);
      expect(res.json()).toMatchObject({ model: 'm1', active_decode_blocks_threshold: null });
    }
  });

  it('still refuses a body over the limit with 413', async () => {
    t = testApp({ options: { bodyLimitBytes: 256 } });
    const res = await t.app.inject({
      method: 'DELETE',
      url: '/busy_threshold?model=m1&check=active_decode_blocks_threshold',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ padding: 'x'.repeat(300) }),
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ error: expect.any(String) });
  });

  it('answers an unknown check or a missing parameter with 400 and an unknown model with 404', async () => {
    t = testApp();
    const check = await t.app.inject({ method: 'DELETE', url: '/busy_threshold?model=m1&check=queue' });
    expect(check.statusCode).toBe(400);
    expect(check.json<{ error: string }>().error).toContain(
      'active_decode_blocks_threshold, active_prefill_tokens_threshold, active_prefill_tokens_threshold_frac',
    );
    expect((await t.app.inject({ method: 'DELETE', url: '/busy_threshold?check=active_decode_blocks_threshold' })).statusCode).toBe(400);
    const model = await t.app.inject({ method: 'DELETE', url: '/busy_threshold?model=ghost&check=active_decode_blocks_threshold' });
    expect(model.statusCode).toBe(404);
    expect(model.json()).toEqual({ error: "Model 'ghost' not found. Thresholds can only be changed for discovered models." });
  });
});

describe('with the admin API off', () => {
  it('answers 404 on every /busy_threshold method', async () => {
    t = testApp({ options: { adminApi: false } });
    for (const method of ['GET', 'POST', 'DELETE'] as const) {
      const res = await t.app.inject({
        method,
        url: '/busy_threshold?model=m1&check=active_decode_blocks_threshold',
        ...(method === 'POST' ? { payload: { model: 'm1', active_prefill_tokens_threshold: 1 } } : {}),
      });
      expect(res.statusCode, method).toBe(404);
    }
    expect(t.thresholds.values.size).toBe(0);
  });
});
