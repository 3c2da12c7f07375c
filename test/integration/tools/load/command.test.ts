// `load` subcommand in process against a simulated engine: table and JSON summaries, progress, exit 1.
// Usage errors: test/unit/tools/load/command.test.ts.
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulatedEngine, type RunningEngine } from '../../../../src/tools/engine/index.js';
import { registerLoadCommand } from '../../../../src/tools/load/command.js';
import type { LoadSummary } from '../../../../src/tools/load/stats.js';
import { fakeIo } from '../../../support/fake-io.js';

function program(io: ReturnType<typeof fakeIo>): Command {
  const p = new Command('dynamo-sidecar').exitOverride();
  registerLoadCommand(p, io);
  return p;
}

let engine: RunningEngine;

beforeAll(async () => {
  engine = await startSimulatedEngine({ decodeStepMs: 1 });
});

afterAll(async () => {
  await engine?.close();
});

describe('load command', () => {
  it('prints the summary as one JSON object with --json', async () => {
    const io = fakeIo();
    await program(io).parseAsync(['load', '--target', engine.address, '--count', '6', '--concurrency', '3', '--max-tokens', '2-4', '--json', '--quiet'], {
      from: 'user',
    });
    expect(io.exits).toEqual([0]);
    expect(io.out).toHaveLength(1);
    const summary = JSON.parse(io.out[0]!) as LoadSummary;
    expect(Object.keys(summary)).toEqual(
      expect.arrayContaining(['sent', 'completed', 'rejected', 'errors', 'ttft_ms', 'itl_ms', 'tokens_per_s', 'requests_per_s', 'duration_s']),
    );
    expect(summary).toMatchObject({ sent: 6, completed: 6, rejected: 0, errors: {} });
    expect(Object.keys(summary.ttft_ms)).toEqual(['p50', 'p90', 'p99']);
    expect(io.progressOut).toEqual([]);
  });

  it('takes every setting from its env twin, the switches too', async () => {
    const io = {
      ...fakeIo(),
      env: {
        DYN_LOAD_CLIENT_TARGET: engine.address,
        DYN_LOAD_CLIENT_COUNT: '3',
        DYN_LOAD_CLIENT_MAX_TOKENS: '2',
        DYN_LOAD_CLIENT_JSON: 'true',
        DYN_LOAD_CLIENT_QUIET: '1',
      },
    };
    await program(io).parseAsync(['load'], { from: 'user' });
    expect(io.exits).toEqual([0]);
    expect(JSON.parse(io.out.join(''))).toMatchObject({ sent: 3, completed: 3 });
    expect(io.progressOut).toEqual([]);
  });

  it('prints a summary table and redraws one progress line on a TTY', async () => {
    const io = fakeIo(true);
    await program(io).parseAsync(['load', '--target', engine.address, '--duration-s', '1.2', '--concurrency', '2'], { from: 'user' });
    expect(io.exits).toEqual([0]);
    const table = io.out.join('');
    for (const label of ['sent', 'completed', 'rejected', 'errors', 'TTFT (ms)', 'inter-token (ms)', 'tokens/s', 'requests/s']) expect(table).toContain(label);
    expect(io.progressOut.length).toBeGreaterThan(0);
    const line = /^\r\[([#-]{24})\] +(\d+)% \[ *\d+\.\ds\] sent \d+ done \d+ rejected 0 errors 0 in-flight \d+ tok\/s \d+\x1b\[K$/;
    expect(io.progressOut[0]).toMatch(line);
    // The bar fills as the 1.2 s run goes on.
    const percents = io.progressOut.slice(0, -1).map((l) => Number(line.exec(l)![2]));
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    expect(percents.at(-1)).toBeGreaterThan(percents[0]!);
    expect(io.progressOut.at(-1)).toBe('\n');
  });

  it('exits 1 when no request completed', async () => {
    const io = fakeIo();
    await program(io).parseAsync(['load', '--target', '127.0.0.1:1', '--count', '2', '--quiet', '--json'], { from: 'user' });
    expect(io.exits).toEqual([1]);
    expect(JSON.parse(io.out[0]!)).toMatchObject({ sent: 2, completed: 0, errors: { UNAVAILABLE: 2 } });
  });
});
