import { describe, expect, it } from 'vitest';
import { parseFrontendConfig } from '../../../src/frontend/frontend-config.js';
import { problemsOf } from '../../support/config-problems.js';

describe('frontend config', () => {
  it('defaults: port 8000, predicted-ttft routing, no thresholds (no predicted-TTFT check either), 529, admin API on', () => {
    const c = parseFrontendConfig({ workers: ['127.0.0.1:50050'] }, {});
    expect(c).toMatchObject({
      httpPort: 8000,
      routerMode: 'predicted-ttft',
      maxPredictedTtftMs: null,
      overloadStatus: 529,
      retryAfterS: 1,
      overloadLeaseMs: 1000,
      adminApi: true,
      workers: ['127.0.0.1:50050'],
      natsServers: undefined,
      thresholds: { active_decode_blocks_threshold: null, active_prefill_tokens_threshold: null, active_prefill_tokens_threshold_frac: null },
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('thresholds from flags or their Dynamo env twins; the literal None turns one off', () => {
    const c = parseFrontendConfig(
      { activeDecodeBlocksThreshold: '0.85' },
      { DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD: '10000', DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC: 'None', DYN_ACTIVE_DECODE_BLOCKS_THRESHOLD: '0.1' },
    );
    expect(c.thresholds).toEqual({ active_decode_blocks_threshold: 0.85, active_prefill_tokens_threshold: 10000, active_prefill_tokens_threshold_frac: null });
  });

  it('--router-mode and DYN_ROUTER_MODE take every mode; the flag wins', () => {
    for (const mode of ['predicted-ttft', 'round-robin', 'random', 'least-loaded', 'kv']) {
      expect(parseFrontendConfig({ routerMode: mode }, {}).routerMode).toBe(mode);
      expect(parseFrontendConfig({}, { DYN_ROUTER_MODE: mode }).routerMode).toBe(mode);
    }
    expect(parseFrontendConfig({ routerMode: 'kv' }, { DYN_ROUTER_MODE: 'predicted-ttft' }).routerMode).toBe('kv');
  });

  it.each([
    ['unset', {}, {}, null],
    ['0 (off, as unset)', { maxPredictedTtftMs: '0' }, {}, null],
    ['the flag', { maxPredictedTtftMs: '250' }, {}, 250],
    ['the env twin', {}, { DYN_MAX_PREDICTED_TTFT_MS: '1000' }, 1000],
    ['the flag over the env twin', { maxPredictedTtftMs: '300' }, { DYN_MAX_PREDICTED_TTFT_MS: '1000' }, 300],
    ['the largest', { maxPredictedTtftMs: '3600000' }, {}, 3_600_000],
  ])('--max-predicted-ttft-ms: %s', (_, flags, env, expected) => {
    expect(parseFrontendConfig(flags, env).maxPredictedTtftMs).toBe(expected);
  });

  it.each([
    [{ maxPredictedTtftMs: '-1' }, {}, '--max-predicted-ttft-ms must be an integer in 0..3600000, got "-1"'],
    [{ maxPredictedTtftMs: '1.5' }, {}, '--max-predicted-ttft-ms must be an integer in 0..3600000, got "1.5"'],
    [{ maxPredictedTtftMs: 'None' }, {}, '--max-predicted-ttft-ms must be an integer in 0..3600000, got "None"'],
    [{}, { DYN_MAX_PREDICTED_TTFT_MS: '3600001' }, 'DYN_MAX_PREDICTED_TTFT_MS must be an integer in 0..3600000, got "3600001"'],
  ])('--max-predicted-ttft-ms refuses %j %j naming the flag or variable', (flags, env, problem) => {
    expect(problemsOf(() => parseFrontendConfig(flags, env))).toEqual([problem]);
  });

  it('every bad value is reported at once, naming its flag or variable', () => {
    const found = problemsOf(() =>
      parseFrontendConfig(
        { activeDecodeBlocksThreshold: '1.5', activePrefillTokensThreshold: '-1', routerMode: 'fastest', workers: ['nope'] },
        { DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC: 'NaN', DYN_HTTP_PORT: '70000', NATS_SERVER: 'http://x' },
      ),
    );
    expect(found).toEqual([
      expect.stringMatching(/^DYN_HTTP_PORT must be/),
      expect.stringMatching(/^--worker: /),
      expect.stringMatching(/^NATS_SERVER must be nats:\/\//),
      expect.stringMatching(/^--router-mode must be one of predicted-ttft, round-robin, random, least-loaded, kv/),
      expect.stringMatching(/^--active-decode-blocks-threshold must be a number in 0\.\.1 or "None", got "1\.5"/),
      expect.stringMatching(/^--active-prefill-tokens-threshold must be an integer >= 0/),
      expect.stringMatching(/^DYN_ACTIVE_PREFILL_TOKENS_THRESHOLD_FRAC must be a number >= 0/),
    ]);
  });

  it("the body limit is half the workers' message limit by default, and a larger one is accepted with a warning", () => {
    const c = parseFrontendConfig({}, {});
    expect(c).toMatchObject({ maxBodyBytes: 2 * 1024 * 1024, workerMaxMessageBytes: 4 * 1024 * 1024, tokenizerThreads: 2 });
    expect(c.warnings).toEqual([]);
    expect(parseFrontendConfig({ maxBodyBytes: String(8 * 1024 * 1024) }, {}).warnings).toEqual([
      "a body limit (8388608 bytes) over half the workers' message limit (4194304 bytes) admits prompts whose Generate message may not fit: those get 413 once tokenized",
    ]);
    expect(parseFrontendConfig({ maxBodyBytes: String(8 * 1024 * 1024), workerMaxMessageBytes: String(16 * 1024 * 1024) }, {}).warnings).toEqual([]);
    expect(parseFrontendConfig({}, { DYN_FRONTEND_TOKENIZER_THREADS: '0' }).tokenizerThreads).toBe(0);
  });

  it('refuses a message limit under 64 KiB or over int32, and a tokenizer thread count over 64, naming the flag', () => {
    expect(problemsOf(() => parseFrontendConfig({ workerMaxMessageBytes: '1000', tokenizerThreads: '65' }, {}))).toEqual([
      expect.stringMatching(/^--worker-max-message-bytes must be/),
      expect.stringMatching(/^--tokenizer-threads must be/),
    ]);
    expect(problemsOf(() => parseFrontendConfig({}, { DYN_FRONTEND_WORKER_MAX_MESSAGE_BYTES: String(2 ** 31) }))).toEqual([
      expect.stringMatching(/^DYN_FRONTEND_WORKER_MAX_MESSAGE_BYTES must be/),
    ]);
  });

  it("a bad DYN_HTTP_OVERLOAD_STATUS_CODE falls back to 529 with a warning (Dynamo's rule); 200-999 is used as given", () => {
    expect(parseFrontendConfig({}, { DYN_HTTP_OVERLOAD_STATUS_CODE: '503' }).overloadStatus).toBe(503);
    for (const bad of ['150', 'abc', '1000']) {
      const c = parseFrontendConfig({}, { DYN_HTTP_OVERLOAD_STATUS_CODE: bad });
      expect(c.overloadStatus).toBe(529);
      expect(c.warnings).toEqual([expect.stringContaining(`DYN_HTTP_OVERLOAD_STATUS_CODE="${bad}"`)]);
    }
  });

  it('--admission-control is accepted and ignored with a warning; DYN_DISABLE_FRONTEND_ADMIN_API turns the admin API off', () => {
    const c = parseFrontendConfig({ admissionControl: 'token-capacity' }, { DYN_DISABLE_FRONTEND_ADMIN_API: 'true' });
    expect(c.warnings).toEqual([expect.stringContaining('--admission-control=token-capacity has no effect')]);
    expect(c.adminApi).toBe(false);
  });

  it('HTTP limits: 60 s to receive a request, 10 s for its headers, 10000 connections; from flags or env, 0 = none', () => {
    expect(parseFrontendConfig({}, {})).toMatchObject({ httpReceiveTimeoutMs: 60_000, httpHeadersTimeoutMs: 10_000, httpMaxConnections: 10_000 });
    const c = parseFrontendConfig(
      { httpReceiveTimeoutMs: '5000', httpMaxConnections: '0' },
      { DYN_HTTP_HEADERS_TIMEOUT_MS: '0', DYN_HTTP_RECEIVE_TIMEOUT_MS: '1' },
    );
    expect(c).toMatchObject({ httpReceiveTimeoutMs: 5000, httpHeadersTimeoutMs: 0, httpMaxConnections: 0 });
  });

  it('HTTP limits: bad values are reported naming the flag or variable; a headers timeout over the receive timeout too', () => {
    expect(problemsOf(() => parseFrontendConfig({ httpReceiveTimeoutMs: '1.5', httpMaxConnections: '-1' }, { DYN_HTTP_HEADERS_TIMEOUT_MS: 'soon' }))).toEqual([
      '--http-receive-timeout-ms must be an integer in 0..3600000, got "1.5"',
      'DYN_HTTP_HEADERS_TIMEOUT_MS must be an integer in 0..3600000, got "soon"',
      '--http-max-connections must be an integer in 0..1000000, got "-1"',
    ]);
    expect(problemsOf(() => parseFrontendConfig({ httpHeadersTimeoutMs: '20000' }, { DYN_HTTP_RECEIVE_TIMEOUT_MS: '15000' }))).toEqual([
      '--http-headers-timeout-ms must be at most --http-receive-timeout-ms or DYN_HTTP_RECEIVE_TIMEOUT_MS (15000), got "20000"',
    ]);
  });

  it('HTTP limits: the default headers timeout shrinks to a shorter receive timeout (node refuses a longer one)', () => {
    expect(parseFrontendConfig({ httpReceiveTimeoutMs: '3000' }, {})).toMatchObject({ httpReceiveTimeoutMs: 3000, httpHeadersTimeoutMs: 3000 });
    expect(parseFrontendConfig({ httpReceiveTimeoutMs: '0' }, {})).toMatchObject({ httpReceiveTimeoutMs: 0, httpHeadersTimeoutMs: 10_000 });
  });

  it('--worker is repeatable and also takes a comma-separated env list; duplicates collapse', () => {
    expect(parseFrontendConfig({ workers: ['a:1', 'b:2,a:1'] }, {}).workers).toEqual(['a:1', 'b:2']);
    expect(parseFrontendConfig({}, { DYN_FRONTEND_WORKERS: 'a:1, c:3' }).workers).toEqual(['a:1', 'c:3']);
  });
});
