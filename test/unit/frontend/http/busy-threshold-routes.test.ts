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

describe('/busy_threshold priority_threshold_scales', () => {
  it('is absent from an entry whose model has no classes (the entry stays exactly Dynamo’s), and shown once it has', async () => {
    t = testApp();
    t.router.modelList = ['m1', 'm2'];
    t.thresholds.setPriorityScales('m2', [
      { priority: 1, scale: 0.8 },
      { priority: 5, scale: 0.5 },
    ]);
    const listed = (await t.app.inject({ method: 'GET', url: '/busy_threshold' })).json<{ thresholds: Record<string, unknown>[] }>();
    expect(listed.thresholds[0]).not.toHaveProperty('priority_threshold_scales');
    expect(listed.thresholds[1]).toMatchObject({ model: 'm2', priority_threshold_scales: { '1': 0.8, '5': 0.5 } });
    const read = await post({ model: 'm2' });
    expect(read.json()).toMatchObject({ priority_threshold_scales: { '1': 0.8, '5': 0.5 } });
  });

  it("replaces the model's list with the one given, alone or with thresholds; null or absent keeps it; {} clears it", async () => {
    t = testApp();
    const set = await post({ model: 'm1', priority_threshold_scales: { '5': 0.5, '-2': 2 } });
    expect(set.statusCode).toBe(200);
    expect(set.json()).toEqual({ model: 'm1', ...NULLS, priority_threshold_scales: { '-2': 2, '5': 0.5 }, diagnostics: { inactive_checks: [] } });
    expect(t.thresholds.priorityScales('m1')).toEqual([
      { priority: -2, scale: 2 },
      { priority: 5, scale: 0.5 },
    ]);
    const both = await post({ model: 'm1', active_prefill_tokens_threshold: 100, priority_threshold_scales: { '3': 0.25 } });
    expect(both.json()).toMatchObject({ active_prefill_tokens_threshold: 100, priority_threshold_scales: { '3': 0.25 } });
    await post({ model: 'm1', active_prefill_tokens_threshold: 50, priority_threshold_scales: null });
    await post({ model: 'm1', active_prefill_tokens_threshold: 60 });
    expect(t.thresholds.priorityScales('m1')).toEqual([{ priority: 3, scale: 0.25 }]);
    const cleared = await post({ model: 'm1', priority_threshold_scales: {} });
    expect(cleared.json()).not.toHaveProperty('priority_threshold_scales');
    expect(t.thresholds.priorityScales('m1')).toEqual([]);
    expect(t.thresholds.get('m1').active_prefill_tokens_threshold).toBe(60);
  });

  it('answers a wrong shape with 422 and a wrong value with 400, changing nothing', async () => {
    t = testApp();
    t.thresholds.setPriorityScales('m1', [{ priority: 1, scale: 0.5 }]);
    const cases: [unknown, number, string][] = [
      [[0.5], 422, 'invalid type for `priority_threshold_scales`'],
      ['0.5', 422, 'invalid type for `priority_threshold_scales`'],
      [{ '1': '0.5' }, 422, 'invalid type for `priority_threshold_scales.1`'],
      [{ '1': null }, 422, 'invalid type for `priority_threshold_scales.1`'],
      [{ high: 0.5 }, 400, 'priority_threshold_scales keys must be integer priorities, got "high"'],
      [{ '1.5': 0.5 }, 400, 'keys must be integer priorities'],
      [{ ' 1': 0.5 }, 400, 'keys must be integer priorities'],
      [{ '1': 0 }, 400, 'priority_threshold_scales: priority 1: scale must be a number > 0 and <= 10, got 0'],
      [{ '1': 11 }, 400, 'scale must be a number > 0 and <= 10'],
      [{ '1': -1 }, 400, 'scale must be'],
      [{ '1': 0.5, '+1': 0.7 }, 400, 'priority 1 is given twice'],
      [{ '4294967296': 0.5 }, 400, 'keys must be integer priorities'],
    ];
    for (const [scales, status, error] of cases) {
      const res = await post({ model: 'm1', active_prefill_tokens_threshold: 5, priority_threshold_scales: scales });
      expect(res.statusCode, JSON.stringify(scales)).toBe(status);
      expect(res.json<{ error: string }>().error).toContain(error);
    }
    expect(t.thresholds.priorityScales('m1')).toEqual([{ priority: 1, scale: 0.5 }]);
    expect(t.thresholds.get('m1').active_prefill_tokens_threshold).toBeNull();
  });

  it('refuses a set for a model with no workers (404), as for the thresholds', async () => {
    t = testApp();
    const res = await post({ model: 'ghost', priority_threshold_scales: { '1': 0.5 } });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: "Model 'ghost' not found. Thresholds can only be set for discovered models." });
    expect(t.thresholds.scales.has('ghost')).toBe(false);
  });
});
