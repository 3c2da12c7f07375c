/**
 * The frontend command's surface, in process (`dynamo-sidecar frontend`): --help lists every
 * flag with its env twin, bad values and a missing load source exit 2 naming the flag.
 */
import { describe, expect, it } from 'vitest';
import { describeFrontend } from '../../../src/frontend/command.js';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { FRONTEND_OPTIONS } from '../../../src/frontend/options.js';
import { runMain as run } from '../../support/run-main.js';

describe('dynamo-sidecar frontend', () => {
  it('--help lists every option with its env twin and default', async () => {
    const { out, exits } = await run(['frontend', '--help']);
    expect(exits).toEqual([0]);
    for (const spec of Object.values(FRONTEND_OPTIONS)) {
      expect(out).toContain(spec.env);
      if ('flag' in spec) expect(out).toContain(spec.flag.split(' ')[0]);
    }
    expect(out).toContain('DYN_HTTP_OVERLOAD_STATUS_CODE');
  });

  it('exits 2 naming each bad flag or variable, all at once', async () => {
    const { err, exits } = await run(['frontend', '--worker', '127.0.0.1:1', '--router-mode', 'fastest', '--active-decode-blocks-threshold', '2'], {
      DYN_HTTP_PORT: 'x',
    });
    expect(exits).toEqual([2]);
    expect(err).toContain('--router-mode must be one of');
    expect(err).toContain('--active-decode-blocks-threshold must be a number in 0..1');
    expect(err).toContain('DYN_HTTP_PORT must be');
  });

  it('exits 2 naming --max-predicted-ttft-ms or its env twin when the value is not a whole number of ms', async () => {
    const byFlag = await run(['frontend', '--worker', '127.0.0.1:1', '--max-predicted-ttft-ms', 'fast']);
    expect(byFlag.exits).toEqual([2]);
    expect(byFlag.err).toContain('--max-predicted-ttft-ms must be an integer in 0..3600000, got "fast"');
    const byEnv = await run(['frontend', '--worker', '127.0.0.1:1'], { DYN_MAX_PREDICTED_TTFT_MS: '-5' });
    expect(byEnv.exits).toEqual([2]);
    expect(byEnv.err).toContain('DYN_MAX_PREDICTED_TTFT_MS must be an integer in 0..3600000, got "-5"');
  });

  it('--help explains the predicted-ttft mode, its default, and the fourth busy check', async () => {
    const out = (await run(['frontend', '--help'])).out.replace(/\s+/g, ' ');
    expect(out).toMatch(/--router-mode <mode> predicted-ttft \(lowest predicted_ttft_ms .*?\(env DYN_ROUTER_MODE; default predicted-ttft\)/);
    expect(out).toMatch(
      /--ttft-slo-ms <ms> +the time-to-first-token SLO.*?an unknown prediction is never busy.*?\(env DYN_FRONTEND_TTFT_SLO_MS; default unset \(check off\)\)/,
    );
  });

  it('the startup line names the router mode and lists the fourth check among the thresholds when it is on', () => {
    const line = (flags: Record<string, string>) => describeFrontend(parseFrontendConfig({ workers: ['127.0.0.1:1'], ...flags }, {}), 8000);
    expect(line({})).toMatch(/, router predicted-ttft, thresholds none \(busy rejection off\)$/);
    expect(line({ maxPredictedTtftMs: '0' })).toMatch(/, thresholds none \(busy rejection off\)$/);
    expect(line({ routerMode: 'kv', maxPredictedTtftMs: '500', activePrefillTokensThreshold: '10' })).toMatch(
      /, router kv, thresholds active_prefill_tokens_threshold=10 ttft_slo_ms=500$/,
    );
  });

  it('exits 2 when it has no worker and no NATS to learn workers from', async () => {
    const { err, exits } = await run(['frontend', '--http-port', '0', '--http-host', '127.0.0.1']);
    expect(exits).toEqual([2]);
    expect(err).toContain('no workers to route to: give --worker HOST:PORT (repeatable) or --nats-url (NATS_SERVER)');
  });
});
