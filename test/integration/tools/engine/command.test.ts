// `engine` subcommand serving: in process with a fake io, and once as a real process with SIGTERM.
// Usage errors and --help: test/unit/tools/engine/command.test.ts.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { registerEngineCommand } from '../../../../src/tools/engine/command.js';
import { engineClient, generate } from '../../../support/vllm-client.js';
import { waitFor } from '../../../support/wait.js';
import { fakeIo } from '../../../support/fake-io.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

function program(io: ReturnType<typeof fakeIo>): Command {
  const p = new Command('dynamo-sidecar').exitOverride();
  registerEngineCommand(p, io);
  return p;
}

describe('engine command', () => {
  it('prints its addresses, serves, and closes cleanly on SIGTERM', async () => {
    const io = fakeIo();
    const run = program(io).parseAsync(['engine', '--decode-step-ms', '1', '--model-name', 'cmd-model'], { from: 'user' });
    await waitFor(() => io.out.length > 0, 'ready line', 5000);
    const match = /^simulated engine ready grpc=(127\.0\.0\.1:\d+) metrics=(http:\/\/127\.0\.0\.1:\d+\/metrics) model=cmd-model\n$/.exec(io.out[0]!);
    expect(match).not.toBeNull();
    const client = engineClient(match![1]!);
    const out = await generate(client, { request_id: 'c', text: 'hi', sampling_params: { max_tokens: 2 } });
    client.close();
    expect(out.code).toBe(0);
    expect((await fetch(match![2]!)).status).toBe(200);
    io.emitter.emit('SIGTERM');
    await run;
    expect(io.exits).toEqual([0]);
    await expect(fetch(match![2]!)).rejects.toThrow();
  });

  it('runs as a real process and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/cli-entry.ts', 'engine', '--port', '0'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => stdout.includes('\n'), 'ready line', 15_000);
      expect(stdout).toMatch(/^simulated engine ready grpc=127\.0\.0\.1:\d+ /);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
