/**
 * SidecarStatusPage behind a plain node:http server on 127.0.0.1:0: its paths, the page and its
 * files, the stream's snapshot (N, Q, F and occupancy, rejections/s by reason from the registry,
 * the engine, the ranks, the settings) and its shutdown.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { SidecarStatusPage, type SidecarStatusDeps } from '../../../../src/sidecar/system/status-page.js';
import { waitFor } from '../../../support/wait.js';
import { admissionSettingsOf, parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';

let server: Server | undefined;
let page: SidecarStatusPage | undefined;
afterEach(async () => {
  page?.close();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

async function start(over: Partial<SidecarStatusDeps> = {}) {
  const registry = new Registry();
  const rejections = new Counter({ name: 'dynamo_sidecar_rejections_total', help: 'r', labelNames: ['reason'], registers: [registry] });
  let now = 1_000;
  const rank = {
    worker_id: 42,
    dp_rank: 0,
    model: 'm',
    kv_used_blocks: 3,
    active_decode_blocks: 3,
    kv_total_blocks: 8,
    active_prefill_tokens: 5,
    predicted_ttft_ms: 9,
    overloaded: false,
  } as LoadEvent;
  page = new SidecarStatusPage({
    registry,
    gate: { inEngine: 2, queued: 1, limit: 4, queueLimit: 3, firstTokenLimit: Infinity, awaitingFirstToken: 1 },
    control: { settings: admissionSettingsOf(parseSidecarConfig({ engineRequestLimit: '4' }, {})), limitInForce: 4, lastChange: { source: 'startup', at: 0 } },
    adminApi: false,
    engine: () => ({ address: '127.0.0.1:9', reachable: false, reason: 'connection refused', loadSource: 'scrape every 50 ms (vllm)' }),
    ranks: () => [rank],
    draining: () => false,
    // Each reading is 1 s after the last: every sample sees a full second, whatever real time passed.
    now: () => (now += 1000),
    intervalMs: 50,
    ...over,
  });
  const p = page;
  server = createServer((req, res) => void p.serve(req, res));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, rejections, page: p };
}

/** The first `count` snapshots of the stream. */
async function snapshots(base: string, count: number): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${base}/status/events`, { signal: AbortSignal.timeout(5000) });
  expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  const reader = res.body!.getReader();
  let text = '';
  const frames: Record<string, unknown>[] = [];
  while (frames.length < count) {
    const { value } = (await reader.read()) as { value: Uint8Array };
    text += new TextDecoder().decode(value);
    const parts = text.split('\n\n');
    text = parts.pop()!;
    for (const part of parts) if (part.startsWith('data: ')) frames.push(JSON.parse(part.slice(6)) as Record<string, unknown>);
  }
  await reader.cancel();
  return frames;
}

describe('SidecarStatusPage', () => {
  it('claims / and /status paths only', async () => {
    const { page } = await start();
    expect(['/', '/status', '/status?x', '/status/events', '/status/sidecar.js'].map((u) => page.handles(u))).toEqual([true, true, true, true, true]);
    expect(['/metrics', '/admission', '/load', '/statusx'].map((u) => page.handles(u))).toEqual([false, false, false, false]);
  });

  it('redirects / and serves the page and its files; other methods get 405', async () => {
    const { base } = await start();
    const root = await fetch(`${base}/`, { redirect: 'manual' });
    expect([root.status, root.headers.get('location')]).toEqual([302, '/status']);
    const html = await fetch(`${base}/status`);
    expect(html.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await html.text()).toContain('/status/sidecar.js');
    expect((await fetch(`${base}/status/sidecar.js`)).status).toBe(200);
    expect((await fetch(`${base}/status/frontend.js`)).status).toBe(404);
    expect((await fetch(`${base}/status`, { method: 'POST' })).status).toBe(405);
  });

  it('streams N, Q, F and their occupancy, rejections/s by reason, the engine, the ranks and the settings', async () => {
    const { base, rejections, page } = await start();
    page.start();
    // After two samples (the first is the baseline), 3 rejections.
    await waitFor(async () => ((await snapshots(base, 1))[0]!['history'] as { t: number[] }).t.length > 0, 'two samples', 5000, 20);
    rejections.inc({ reason: 'queue_full' }, 3);
    // The sample after the rejections shows them as a rate; the history keeps it.
    const rejectionsSeen = async () => {
      const [s] = await snapshots(base, 1);
      return ((s!['history'] as { series: { rejections: number[] } }).series.rejections.some((v) => v > 0) && s) || undefined;
    };
    await waitFor(async () => (await rejectionsSeen()) !== undefined, 'a rejection rate in the history', 5000, 20);
    const snapshot = await rejectionsSeen();
    expect(snapshot).toMatchObject({
      kind: 'sidecar',
      worker_id: '42',
      model: 'm',
      draining: false,
      admin_api: false,
      admission: { engine_request: 2, engine_request_limit: 4, request_queue: 1, request_queue_limit: 3, first_token_pending: 1, first_token_limit: null },
      engine: { address: '127.0.0.1:9', reachable: false, reason: 'connection refused' },
      ranks: [{ dp_rank: 0, kv_used_blocks: 3, kv_total_blocks: 8, active_prefill_tokens: 5, predicted_ttft_ms: 9, overloaded: false }],
      settings: { engine_request_limit: 4 },
      last_change: { source: 'startup', time: '1970-01-01T00:00:00.000Z' },
    });
  });
});
