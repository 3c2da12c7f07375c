/**
 * The README's first command, the main job: `./bin/dynamo-sidecar demo`, the whole system on one
 * machine with no broker. Run as the README says (the HTTP port moved to a free one), it serves
 * the OpenAI API through two workers, and the load client it suggests overloads it: 200s and
 * 529s only, the 529s counted by the frontend's rejection counter, then a clean exit on SIGTERM.
 */
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIDECAR_BIN, runCli } from '../../support/sidecar-process.js';
import { parseMetric } from '../../support/system-processes.js';
import { waitFor } from '../../support/wait.js';

let demo: ReturnType<typeof spawn>;
let stdout = '';
let url = '';

beforeAll(async () => {
  demo = spawn(process.execPath, [SIDECAR_BIN, 'demo', '--http-port', '0', '--quiet'], { stdio: ['ignore', 'pipe', 'pipe'] });
  demo.stdout!.on('data', (d) => (stdout += d));
  await waitFor(() => /load --openai (\S+)/.test(stdout), 'the demo to print its lines', 30_000, 20);
  url = /load --openai (\S+)/.exec(stdout)![1]!;
});

afterAll(() => {
  if (demo.exitCode === null) demo.kill('SIGKILL');
});

describe('the whole-system demo (the main job)', () => {
  it('prints the frontend, both workers and the lines to try', () => {
    expect(stdout).toMatch(
      /frontend listening on http:\/\/127\.0\.0\.1:\d+, workers 127\.0\.0\.1:\d+,127\.0\.0\.1:\d+, router predicted-ttft, thresholds none/,
    );
    expect(stdout.match(/worker \d: sidecar 127\.0\.0\.1:\d+ \(N=12, Q=4, F=2, max queue wait 50 ms/g)).toHaveLength(2);
    expect(stdout).toContain(`curl -s ${url}/v1/models`);
  });

  it('answers the official OpenAI client through a worker', async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    await waitFor(async () => (await client.models.list()).data.length === 1, 'the model to be listed', 10_000, 50);
    const answer = await client.chat.completions.create({ model: 'simulated-model', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 5 });
    expect(answer.usage).toMatchObject({ completion_tokens: 5 });
  });

  it('is overloaded by the load client it suggests: 200s and 529s only, every 529 counted', async () => {
    const run = await runCli(['load', '--openai', url, '--concurrency', '48', '--duration-s', '3', '--max-tokens', '16', '--json', '--quiet'], {}, 60_000);
    expect(run.code).toBe(0);
    const summary = JSON.parse(run.stdout) as { statuses: Record<string, number>; rejected: number; completed: number };
    expect(Object.keys(summary.statuses).sort()).toEqual(['200', '529']);
    expect(summary.completed).toBeGreaterThan(0);
    expect(summary.rejected).toBe(summary.statuses['529']);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(parseMetric(metrics, 'dynamo_frontend_model_rejection_total', { endpoint: 'chat_completions' })).toBe(summary.statuses['529']);
  });

  it('stops everything on SIGTERM and exits 0', async () => {
    const exited = new Promise<number | null>((resolve) => demo.once('exit', (code) => resolve(code)));
    demo.kill('SIGTERM');
    expect(await exited).toBe(0);
    await expect(fetch(`${url}/live`)).rejects.toThrow();
  });
});
