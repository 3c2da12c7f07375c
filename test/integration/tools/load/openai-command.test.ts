// `load --openai`: flag errors (exit 2, one line naming the flag), the table and JSON
// summaries in-process, a stop by SIGINT, and the real CLI (bin/dynamo-sidecar, built dist/).
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerLoadCommand } from '../../../../src/tools/load/command.js';
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
  it.each([
    [['--openai', 'http://127.0.0.1:8000', '--target', '127.0.0.1:1'], '--openai', /cannot be combined with --target/],
    [['--count', '1'], '--target', /is required .*or --openai URL/],
    [['--openai', '127.0.0.1:8000'], '--openai', /http/],
    [['--openai', 'http://127.0.0.1:8000', '--api', 'embeddings'], '--api', /'chat' or 'completions'/],
    [['--openai', 'http://127.0.0.1:8000', '--overload-status', '5xx'], '--overload-status', /status codes/],
    [['--target', '127.0.0.1:1', '--model', 'm'], '--model', /only with --openai/],
    [['--openai', 'http://127.0.0.1:8000', '--retry-max-ms', '1'], '--retry-max-ms', />= 50/],
  ])('exits 2 with one line naming the flag for %j', async (args, flag, message) => {
    const io = fakeIo();
    await program(io).parseAsync(['load', ...args], { from: 'user' });
    expect(io.exits).toEqual([2]);
    const lines = io.err.join('').split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${flag}:`);
    expect(lines[0]).toMatch(message);
  });

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
      expect(JSON.parse(io.out[0]!)).toMatchObject({ sent: 2, completed: 0, errors: { CANCELLED: 2 }, statuses: { '200': 2 } });
      await waitFor(() => slow.aborted() === 2, 'the server to see both streams aborted');
    } finally {
      await slow.close();
    }
  });
});

describe('bin/dynamo-sidecar load --openai', () => {
  it('prints the JSON summary of a run against the server', async () => {
    const first = server.requests.length;
    const { code, stdout, stderr } = await runCli(['load', '--openai', `${server.url}/v1`, '--count', '10', '--concurrency', '2', '--prompt-tokens', '6', '--max-tokens', '3', '--json', '--quiet']);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const summary = JSON.parse(stdout);
    expect(summary).toMatchObject({ target: `${server.url}/v1/chat/completions`, model: 'fake-model', api: 'chat', sent: 10, completed: 8, rejected: 2, errors: {}, statuses: { '200': 8, '529': 2 } });
    expect(summary.ttft_ms.p50).toBeGreaterThan(0);
    expect(server.requests.slice(first).every((r) => r.body['max_tokens'] === 3)).toBe(true);
  });

  it('documents the mode in --help', async () => {
    const { code, stdout } = await runCli(['load', '--help']);
    expect(code).toBe(0);
    for (const flag of ['--openai <url>', '--model <name>', '--api <kind>', '--overload-status <code>', '--retry-max-ms <ms>']) expect(stdout).toContain(flag);
    expect(stdout).toContain('load --openai http://127.0.0.1:8000 --concurrency 64 --duration-s 20');
  });
});
