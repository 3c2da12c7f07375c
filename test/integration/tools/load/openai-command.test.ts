// `load --openai` against a fake OpenAI server: the table and JSON summaries in process, a stop
// by SIGINT, and the real CLI (bin/dynamo-sidecar, built dist/). Flag errors and --help:
// test/unit/tools/load/command.test.ts.
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerLoadCommand } from '../../../../src/tools/load/command.js';
import type { LoadSummary } from '../../../../src/tools/load/stats.js';
import { startFakeOpenAi, type FakeOpenAiServer } from '../../../support/fake-openai-server.js';
import { fakeIo } from '../../../support/fake-io.js';
import { runCli } from '../../../support/sidecar-process.js';
import { waitFor } from '../../../support/wait.js';

function program(io: ReturnType<typeof fakeIo>): Command {
  const p = new Command('dynamo-sidecar').exitOverride();
  registerLoadCommand(p, io);
  return p;
}

let server: FakeOpenAiServer;

beforeAll(async () => {
  server = await startFakeOpenAi({ chunks: 3, chunkDelayMs: 1, rejectFraction: 0.2, retryAfter: '0' });
});

afterAll(async () => {
  await server?.close();
});

describe('load --openai command', () => {
  it('prints a table naming the URL, the model, rejections as HTTP 529 and the statuses', async () => {
    const io = fakeIo();
    await program(io).parseAsync(['load', '--openai', server.url, '--count', '10', '--concurrency', '2', '--quiet'], { from: 'user' });
    expect(io.exits).toEqual([0]);
    const table = io.out.join('');
    expect(table).toMatch(new RegExp(`^target +${server.url}/v1/chat/completions$`, 'm'));
    expect(table).toMatch(/^model +fake-model \(chat\)$/m);
    expect(table).toMatch(/^rejected +2 \(HTTP 529\)$/m);
    expect(table).toMatch(/^HTTP statuses +200 8, 529 2$/m);
    for (const label of ['completed', 'TTFT (ms)', 'inter-token (ms)', 'tokens/s']) expect(table).toContain(label);
  });

  it('exits 1 with one line when the server lists no model', async () => {
    const empty = await startFakeOpenAi({ models: [] });
    try {
      const io = fakeIo();
      await program(io).parseAsync(['load', '--openai', empty.url, '--count', '1'], { from: 'user' });
      expect(io.exits).toEqual([1]);
      expect(io.out).toEqual([]);
      expect(io.err.join('')).toMatch(/^error: GET http:\/\/127\.0\.0\.1:\d+\/v1\/models lists no models.*--model\n$/);
    } finally {
      await empty.close();
    }
  });

  it('stops on SIGINT, aborting the requests in flight, and still prints the summary', async () => {
    const slow = await startFakeOpenAi({ chunks: 10_000, chunkDelayMs: 20 });
    try {
      const io = fakeIo();
      const run = program(io).parseAsync(['load', '--openai', slow.url, '--concurrency', '2', '--duration-s', '30', '--json', '--quiet'], { from: 'user' });
      await waitFor(() => slow.active() === 2, 'two streams in progress');
      io.emitter.emit('SIGINT');
      await run;
      expect(io.exits).toEqual([1]); // nothing completed
      const summary = JSON.parse(io.out[0]!) as { statuses: Record<string, number> };
      expect(summary).toMatchObject({ sent: 2, completed: 0, errors: { CANCELLED: 2 } });
      // The server counts a stream active before its 200 reaches the client: a SIGINT in between
      // cancels a request that has no status yet (seen once on a loaded machine under Node 24).
      expect(Object.keys(summary.statuses).filter((s) => s !== '200')).toEqual([]);
      expect(summary.statuses['200'] ?? 0).toBeLessThanOrEqual(2);
      await waitFor(() => slow.aborted() === 2, 'the server to see both streams aborted');
    } finally {
      await slow.close();
    }
  });
});

describe('bin/dynamo-sidecar load --openai', () => {
  it('prints the JSON summary of a run against the server', async () => {
    const first = server.requests.length;
    const { code, stdout, stderr } = await runCli([
      'load',
      '--openai',
      `${server.url}/v1`,
      '--count',
      '10',
      '--concurrency',
      '2',
      '--prompt-tokens',
      '6',
      '--max-tokens',
      '3',
      '--json',
      '--quiet',
    ]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const summary = JSON.parse(stdout) as LoadSummary;
    expect(summary).toMatchObject({
      target: `${server.url}/v1/chat/completions`,
      model: 'fake-model',
      api: 'chat',
      sent: 10,
      completed: 8,
      rejected: 2,
      errors: {},
      statuses: { '200': 8, '529': 2 },
    });
    expect(summary.ttft_ms.p50).toBeGreaterThan(0);
    expect(server.requests.slice(first).every((r) => r.body['max_tokens'] === 3)).toBe(true);
  });
});
