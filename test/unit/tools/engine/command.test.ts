// `engine` subcommand usage, in process: --help documents every option, an invalid value or an
// unknown option exits 2 with one line naming it. Serving and signals: test/integration/tools/engine/command.test.ts.
import { describe, expect, it } from 'vitest';
import { ENGINE_OPTIONS } from '../../../../src/tools/engine/options.js';
import { runMain } from '../../../support/run-main.js';

describe('engine command', () => {
  it('documents every option in --help', async () => {
    const { out, exits } = await runMain(['engine', '--help']);
    for (const flag of [
      '--data-parallel-size',
      '--num-gpu-blocks',
      '--block-size',
      '--max-num-seqs',
      '--max-num-batched-tokens',
      '--prefill-tokens-per-s',
      '--decode-step-ms',
      '--max-output-tokens',
      '--early-stop-prob',
      '--seed',
      '--model-name',
      '--port',
      '--host',
      '--metrics-port',
    ]) {
      expect(out).toContain(flag);
    }
    for (const spec of Object.values(ENGINE_OPTIONS)) expect(out.replace(/\s+/g, ' ')).toContain(`env ${spec.env}`);
    expect(exits).toEqual([0]);
  });

  it('rejects an invalid env twin with one stderr line naming the variable and exit code 2', async () => {
    const { err, exits } = await runMain(['engine'], { DYN_SIM_ENGINE_BLOCK_SIZE: 'zero' });
    expect(err).toMatch(/^error: DYN_SIM_ENGINE_BLOCK_SIZE: must be an integer >= 1 .*got 'zero'\n$/);
    expect(exits).toEqual([2]);
  });

  it('rejects an invalid value with one stderr line naming the flag and exit code 2', async () => {
    const { err, exits } = await runMain(['engine', '--block-size', 'zero']);
    expect(err).toMatch(/^error: --block-size: must be an integer >= 1 .*got 'zero'\n$/);
    expect(exits).toEqual([2]);
  });

  it('rejects a negative --max-num-seqs with one stderr line naming the flag and exit code 2', async () => {
    const { err, exits } = await runMain(['engine', '--max-num-seqs', '-3']);
    expect(exits).toEqual([2]);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toContain('--max-num-seqs');
  });

  it.each([
    [['--preset', 'gpt-5-on-a-toaster'], /^error: --preset: must be one of none, llama-3\.3-70b-fp8-2xh100, qwen2\.5-7b-fp16-l4, got "gpt-5-on-a-toaster"\n$/],
    [['--cost-model', 'roofline'], /^error: --cost-model: roofline .* needs --preset .*\n$/],
    [['--time-scale', '0'], /^error: --time-scale: must be a number > 0 and <= 10000, got 0\n$/],
  ])('rejects %j with one stderr line naming the flag and exit code 2', async (args, message) => {
    const { err, exits } = await runMain(['engine', ...args]);
    expect(err).toMatch(message);
    expect(exits).toEqual([2]);
  });

  it('lists the presets in --help', async () => {
    const { out } = await runMain(['engine', '--help']);
    for (const flag of ['--preset', '--cost-model', '--time-scale']) expect(out).toContain(flag);
    expect(out).toContain('llama-3.3-70b-fp8-2xh100');
    expect(out).toContain('qwen2.5-7b-fp16-l4');
  });

  it('maps an unknown option to exit code 2 as well', async () => {
    const { err, exits } = await runMain(['engine', '--bogus']);
    expect(err).toContain("unknown option '--bogus'");
    expect(exits).toEqual([2]);
  });
});
