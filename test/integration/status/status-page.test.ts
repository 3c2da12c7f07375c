/**
 * The status pages in a real browser (chromium, headless) against real processes: the demo (two
 * simulated engines, two sidecars, the frontend) on a port this test picked, a frontend in front
 * of a fake sidecar that reports a hostile model name, and a sidecar with the admin API on.
 * One browser for the whole file. Set STATUS_PAGE_SCREENSHOT=<file.png> to keep the overload
 * screenshot (docs/images/status-page.png is made this way).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerLoadClientCtor } from '../../../src/frontend/sources/push-source.js';
import { launchBrowser, type TestBrowser } from '../../support/browser.js';
import { SIDECAR_BIN, startSidecarProcess, type SidecarProcess } from '../../support/sidecar-process.js';
import { SystemUnderTest } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

let browser: TestBrowser;
beforeAll(async () => {
  browser = await launchBrowser();
}, 40_000);
afterAll(async () => {
  await browser?.close();
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface Demo {
  readonly proc: ChildProcessWithoutNullStreams;
  stdout(): string;
  stop(): Promise<void>;
}

/** `dynamo-sidecar demo` on `port`, resolved once it printed its lines. */
async function startDemo(port: number): Promise<Demo> {
  const proc = spawn(process.execPath, [SIDECAR_BIN, 'demo', '--http-port', String(port), '--active-decode-blocks-threshold', '0.3', '--quiet']);
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d) => (stdout += d));
  proc.stderr.on('data', (d) => (stderr += d));
  await waitFor(() => /load --openai/.test(stdout) || proc.exitCode !== null, 'the demo to start', 30_000, 20);
  if (proc.exitCode !== null) throw new Error(`demo exited ${proc.exitCode}: ${stderr}`);
  return {
    proc,
    stdout: () => stdout,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Pixels of a PNG that differ from its most common colour, counted by decoding it in the browser (no PNG library here). */
async function nonBackgroundPixels(png: Buffer): Promise<{ width: number; height: number; colours: number; foreground: number }> {
  const page = await browser.context.newPage();
  try {
    // A string, run in the page: the test's own types know no DOM.
    return await page.evaluate<{ width: number; height: number; colours: number; foreground: number }>(`(async () => {
      const image = new Image();
      image.src = 'data:image/png;base64,${png.toString('base64')}';
      await image.decode();
      const canvas = document.createElement('canvas');
      canvas.width = image.width;
      canvas.height = image.height;
      const context = canvas.getContext('2d');
      context.drawImage(image, 0, 0);
      const data = context.getImageData(0, 0, image.width, image.height).data;
      const counts = new Map();
      for (let i = 0; i < data.length; i += 4) {
        const key = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const background = Math.max(...counts.values());
      return { width: image.width, height: image.height, colours: counts.size, foreground: data.length / 4 - background };
    })()`);
  } finally {
    await page.close();
  }
}

async function openPage(url: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(url);
  return { page, errors };
}

describe('the frontend status page, against the demo', () => {
  let port: number;
  let demo: Demo;
  let url: string;
  let page: Page;
  let errors: string[];
  beforeAll(async () => {
    port = await freePort();
    demo = await startDemo(port);
    url = `http://127.0.0.1:${port}`;
    ({ page, errors } = await openPage(`${url}/`));
  }, 40_000);
  afterAll(async () => {
    await page?.close();
    await demo?.stop();
  });

  it('prints its URL first and lists both workers', async () => {
    expect(demo.stdout().split('\n')[0]).toBe(`dynamo-sidecar demo: frontend status page ${url}/status (the fleet, live)`);
    expect(page.url()).toBe(`${url}/status`);
    await page.locator('tr[data-worker-id]').nth(1).waitFor({ timeout: 10_000 });
    const rows = page.locator('tr[data-worker-id]');
    expect([await rows.nth(0).getAttribute('data-worker-id'), await rows.nth(1).getAttribute('data-worker-id'), await rows.count()]).toEqual(['1', '2', 2]);
    expect(await page.locator('tr[data-worker-id="1"] td.model').textContent()).toBe('simulated-model');
    expect(await page.locator('#conn').getAttribute('data-state')).toBe('live');
  }, 20_000);

  it('shows a worker busy with the check that fired, and the 529 rate rising, under a short overload', async () => {
    const load = spawn(process.execPath, [SIDECAR_BIN, 'load', '--openai', url, '--concurrency', '64', '--duration-s', '6']);
    try {
      const busy = page.locator('tr[data-state="busy"] .why[data-check="active_decode_blocks_threshold"]').first();
      await busy.waitFor({ timeout: 15_000 });
      expect(await busy.textContent()).toMatch(/^active_decode_blocks_threshold \(rank 0\): \d+ > 38\.4 \(0\.3 of capacity\)$/);
      await waitFor(async () => Number(await page.locator('[data-rate="overload"] .value').getAttribute('data-value')) > 0, 'a 529 rate above 0', 10_000, 100);
      const screenshot = await page.screenshot({ fullPage: true });
      if (process.env['STATUS_PAGE_SCREENSHOT']) writeFileSync(process.env['STATUS_PAGE_SCREENSHOT'], screenshot);
      const pixels = await nonBackgroundPixels(screenshot);
      expect(pixels.width).toBeGreaterThan(1000);
      expect(pixels.colours).toBeGreaterThan(50);
      expect(pixels.foreground / (pixels.width * pixels.height)).toBeGreaterThan(0.05);
    } finally {
      load.kill('SIGKILL');
    }
  }, 30_000);

  it('changes GET /busy_threshold when a threshold is edited on the page, and shows the API error for a bad value', async () => {
    const input = page.locator('tr[data-model="simulated-model"] input[data-check="active_prefill_tokens_threshold"]');
    await input.fill('4096');
    await page.locator('tr[data-model="simulated-model"] td:has(input[data-check="active_prefill_tokens_threshold"]) button[data-action="set"]').click();
    await waitFor(
      async () => {
        const body = (await (await fetch(`${url}/busy_threshold`)).json()) as { thresholds: { active_prefill_tokens_threshold: number | null }[] };
        return body.thresholds[0]?.active_prefill_tokens_threshold === 4096;
      },
      'GET /busy_threshold to show 4096',
      5000,
      50,
    );
    const decode = page.locator('tr[data-model="simulated-model"] input[data-check="active_decode_blocks_threshold"]');
    await decode.fill('2');
    await page.locator('tr[data-model="simulated-model"] td:has(input[data-check="active_decode_blocks_threshold"]) button[data-action="set"]').click();
    await page.locator('#threshold-error', { hasText: '400' }).waitFor({ timeout: 5000 });
    expect(await page.locator('#threshold-error').textContent()).toBe(
      'POST /busy_threshold: 400 active_decode_blocks_threshold must be between 0.0 and 1.0, got 2',
    );
  }, 20_000);

  it('says the connection is lost when the frontend stops, and reconnects when it is back', async () => {
    await demo.stop();
    await page.locator('#conn[data-state="reconnecting"]').waitFor({ timeout: 10_000 });
    demo = await startDemo(port);
    await page.locator('#conn[data-state="reconnected"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#conn').textContent()).toBe('reconnected: the process restarted');
    await page.locator('tr[data-worker-id]').nth(1).waitFor({ timeout: 10_000 });
    expect(errors).toEqual([]);
  }, 45_000);
});

describe('the frontend status page with a hostile worker', () => {
  const sys = new SystemUnderTest();
  let server: grpc.Server;
  afterAll(async () => {
    await sys.stopAll();
    server?.forceShutdown();
  });

  it('shows a model name carrying markup as text, and runs none of it', async () => {
    // A fake sidecar's WorkerLoad.Watch: worker ids must be integers (the frontend refuses others), the model name is any string.
    const hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';
    server = new grpc.Server();
    type Watch = grpc.ServerWritableStream<object, { ranks: object[] }>;
    server.addService(workerLoadClientCtor().service, {
      Watch: (call: Watch) => void call.write({ ranks: [{ worker_id: 7, dp_rank: 0, model: hostile, heartbeat_ms: 60_000, kv_total_blocks: 10 }] }),
    });
    const grpcPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const frontend = await sys.frontend(['--worker', `127.0.0.1:${grpcPort}`]);
    const { page, errors } = await openPage(`${frontend.url}/status`);
    try {
      await page.locator('tr[data-worker-id="7"]').waitFor({ timeout: 10_000 });
      expect(await page.locator('tr[data-worker-id="7"] td.model').textContent()).toBe(hostile);
      expect(await page.locator(`tr[data-model] td.model`).first().textContent()).toBe(hostile);
      expect(await page.locator('main img, main script').count()).toBe(0);
      expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 30_000);
});

describe('the sidecar status page', () => {
  let sidecar: SidecarProcess;
  afterAll(async () => {
    await sidecar?.stop('SIGKILL');
  });

  it('shows N, Q and the engine unreachable, and changes a setting through PUT /admission with the typed token', async () => {
    sidecar = await startSidecarProcess(['--upstream', '127.0.0.1:1', '--admin-token', 'page-test-token-0123', '--engine-request-limit', '5']);
    const { page, errors } = await openPage(`http://127.0.0.1:${sidecar.systemPort}/`);
    try {
      await page.locator('#admission .bar').first().waitFor({ timeout: 10_000 });
      expect(await page.locator('#admission .bar .label').first().textContent()).toBe('0 / 5');
      await page.locator('#engine .state-unreachable').waitFor({ timeout: 10_000 });
      const limit = page.locator('input[data-field="engine_request_limit"]');
      await limit.fill('7');
      await page.locator('tr:has(input[data-field="engine_request_limit"]) button').click();
      await page.locator('#settings-error', { hasText: 'type the admin token first' }).waitFor({ timeout: 5000 });
      await page.locator('#token').fill('wrong-token');
      await page.locator('tr:has(input[data-field="engine_request_limit"]) button').click();
      await page.locator('#settings-error', { hasText: '403' }).waitFor({ timeout: 5000 });
      await page.locator('#token').fill('page-test-token-0123');
      await page.locator('tr:has(input[data-field="engine_request_limit"]) button').click();
      await waitFor(
        async () => {
          const res = await fetch(`http://127.0.0.1:${sidecar.systemPort}/admission`, { headers: { authorization: 'Bearer page-test-token-0123' } });
          return ((await res.json()) as { engine_request_limit: number }).engine_request_limit === 7;
        },
        'GET /admission to show 7',
        5000,
        50,
      );
      await page.locator('#admission .bar .label', { hasText: '0 / 7' }).waitFor({ timeout: 5000 });
      // The token lives in the input only.
      expect(await page.evaluate<string>('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + location.href')).not.toContain(
        'page-test-token-0123',
      );
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 30_000);
});
