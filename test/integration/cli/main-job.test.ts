/**
 * The README's two commands, and the sidecar-only demo (`./bin/dynamo-sidecar` with no
 * --upstream): the sidecar in front of its embedded simulated engine. Run as the README says
 * (ports moved to free ones through their env twins), it answers Generate through the sidecar,
 * shows the call in its metrics, and the load client's counts agree with the sidecar's own
 * counters. The whole-system demo, the first command, is tested in demo.test.ts.
 */
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from '../../../src/tools/load/run.js';
import { startSidecarProcess, type SidecarProcess } from '../../support/sidecar-process.js';
import { engineClient, generate, tokens } from '../../support/vllm-client.js';
import { waitFor } from '../../support/wait.js';

const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The commands of the README's first two code blocks. */
function readmeCommands(): string[] {
  return [...README.matchAll(/```sh\n([^`]+?)\n```/g)].slice(0, 2).map((m) => m[1]!.trim());
}

describe('the README', () => {
  it('starts with exactly two commands: the main job and the whole test suite, each doing its own set-up', () => {
    const intro = README.slice(0, README.indexOf('## '));
    expect([...intro.matchAll(/```sh/g)]).toHaveLength(2);
    expect(readmeCommands()).toEqual(['npm ci && ./bin/dynamo-sidecar demo', 'npm ci && npm test']);
    // CI runs the same command (on Node 24, first on PATH): npm ci, then npm test on a line of its own.
    expect(readFileSync(new URL('../../../.ci/run', import.meta.url), 'utf8')).toMatch(
      /^npm ci --no-audit --no-fund\n(?:.*\n)*?(?:PATH="[^"\n]+" )?npm test\n/m,
    );
  });
});

describe('the sidecar-only demo', () => {
  let sidecar: SidecarProcess;

  beforeAll(async () => {
    expect(README).toContain('The sidecar alone in front of its built-in engine is still `./bin/dynamo-sidecar` (demo mode).');
    sidecar = await startSidecarProcess([], { DYN_SIDECAR_STATUS_INTERVAL_MS: '200' });
  });

  afterAll(async () => {
    await sidecar?.stop();
  });

  it('runs the sidecar with demo limits in front of the embedded simulated engine', () => {
    expect(sidecar.stdout()).toContain('demo mode, no --upstream given: embedded simulated vLLM engine');
    expect(sidecar.startupLine).toContain('engine request limit 32 + queue 16 (hard cap 48)');
  });

  it('answers a Generate through the sidecar and counts it in its metrics', async () => {
    const client = engineClient(sidecar.address);
    try {
      const outcome = await generate(client, {
        request_id: 'readme-1',
        tokenized: { input_ids: tokens(20) },
        sampling_params: { max_tokens: 5 },
        stream: true,
      });
      expect(outcome.code).toBe(grpc.status.OK);
      // Streamed: five one-token chunks, then the complete repeating the last (vLLM's DELTA output).
      expect(outcome.messages.filter((m) => m.chunk).map((m) => m.chunk!.token_ids.length)).toEqual([1, 1, 1, 1, 1]);
      expect(outcome.messages.find((m) => m.complete)?.complete?.completion_tokens).toBe(1);
    } finally {
      client.close();
    }
    expect(await sidecar.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')).toBe(1);
    expect(await sidecar.metric('dynamo_sidecar_engine_request_limit')).toBe(32);
    expect(await sidecar.metric('dynamo_component_total_blocks', 'dp_rank="0"')).toBeGreaterThan(0);
  });

  it('prints a compact status line every few seconds', async () => {
    const statusLine = /\[status\] engine \d+\/32 \| queued \d+\/16 \| rejected \d+ \(\+\d+\/s\) \| \d+ tok\/s/;
    await waitFor(() => statusLine.test(sidecar.stdout()), 'a status line on stdout');
    expect(sidecar.stdout()).toMatch(statusLine);
  });

  it("agrees with the load client: sent = completed + rejected + errors, rejected = the sidecar's rejection delta", async () => {
    const rejectedBefore = await sidecar.metric('dynamo_rejection_request_total');
    const okBefore = await sidecar.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"');
    const summary = await runLoad({
      target: sidecar.address,
      concurrency: 120,
      count: 600,
      promptTokens: { min: 16, max: 64 },
      maxTokens: { min: 2, max: 6 },
      seed: 7,
    });
    const errors = Object.values(summary.errors).reduce((a, b) => a + b, 0);
    expect(summary.sent).toBe(summary.completed + summary.rejected + errors);
    expect(summary.rejected).toBeGreaterThan(0);
    expect(summary.completed).toBeGreaterThan(0);
    expect(summary.rejected).toBe((await sidecar.metric('dynamo_rejection_request_total')) - rejectedBefore);
    expect(summary.completed).toBe((await sidecar.metric('dynamo_sidecar_requests_total', 'grpc_code="OK"')) - okBefore);
    expect(await sidecar.metric('dynamo_engine_request')).toBe(0);
  });
});
