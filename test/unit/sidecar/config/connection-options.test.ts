/** The connection limits, engine connections, /metrics cache and NATS liveness options: defaults, env twins, ranges. */
import { describe, expect, it } from 'vitest';
import { SIDECAR_OPTIONS } from '../../../../src/sidecar/config/options.js';
import { parseSidecarConfig } from '../../../../src/sidecar/config/sidecar-config.js';
import { problems } from '../../../support/config-problems.js';

describe('connection, metrics and NATS liveness options', () => {
  it('have documented defaults, in a frozen object', () => {
    const config = parseSidecarConfig({}, {});
    expect(config.connections).toEqual({
      maxConcurrentStreams: 1000,
      idleTimeoutMs: 300_000,
      handshakeTimeoutMs: 10_000,
      upstreamConnections: SIDECAR_OPTIONS.upstreamConnections.default,
      upstreamPingIntervalMs: 1000,
      upstreamPingTimeoutMs: 3000,
      upstreamKeepaliveIntervalMs: 300_000,
      upstreamKeepaliveWithoutCalls: false,
    });
    expect(Object.isFrozen(config.connections)).toBe(true);
    expect(config.metricsCacheMs).toBe(1000);
    expect(config.load.natsLivenessTimeoutMs).toBe(2000);
  });

  it('read their env twins, and a flag wins over its env', () => {
    const env = {
      DYN_SIDECAR_MAX_CONCURRENT_STREAMS: '64',
      DYN_SIDECAR_IDLE_TIMEOUT_MS: '0',
      DYN_SIDECAR_HANDSHAKE_TIMEOUT_MS: '100',
      DYN_SIDECAR_UPSTREAM_CONNECTIONS: '64',
      DYN_SIDECAR_UPSTREAM_PING_INTERVAL_MS: '250',
      DYN_SIDECAR_UPSTREAM_PING_TIMEOUT_MS: '750',
      DYN_SIDECAR_UPSTREAM_KEEPALIVE_INTERVAL_MS: '60000',
      DYN_SIDECAR_UPSTREAM_KEEPALIVE_WITHOUT_CALLS: 'true',
      DYN_SIDECAR_METRICS_CACHE_MS: '0',
      DYN_NATS_LIVENESS_TIMEOUT_MS: '500',
    };
    const config = parseSidecarConfig({}, env);
    expect(config.connections).toEqual({
      maxConcurrentStreams: 64,
      idleTimeoutMs: 0,
      handshakeTimeoutMs: 100,
      upstreamConnections: 64,
      upstreamPingIntervalMs: 250,
      upstreamPingTimeoutMs: 750,
      upstreamKeepaliveIntervalMs: 60_000,
      upstreamKeepaliveWithoutCalls: true,
    });
    expect(config.metricsCacheMs).toBe(0);
    expect(config.load.natsLivenessTimeoutMs).toBe(500);
    const flagged = parseSidecarConfig(
      {
        maxConcurrentStreams: '2147483647',
        idleTimeoutMs: '5000',
        upstreamConnections: '1',
        upstreamKeepaliveIntervalMs: '600000',
        metricsCacheMs: '250',
        natsLivenessTimeoutMs: '3000',
      },
      env,
    );
    expect(flagged.connections).toMatchObject({
      maxConcurrentStreams: 2 ** 31 - 1,
      idleTimeoutMs: 5000,
      upstreamConnections: 1,
      upstreamKeepaliveIntervalMs: 600_000,
    });
    expect(flagged.metricsCacheMs).toBe(250);
    expect(flagged.load.natsLivenessTimeoutMs).toBe(3000);
  });

  it.each([
    [{ maxConcurrentStreams: '0' }, {}, '--max-concurrent-streams must be an integer in 1..2147483647, got "0"'],
    [{ maxConcurrentStreams: '2147483648' }, {}, '--max-concurrent-streams must be an integer in 1..2147483647, got "2147483648"'],
    [{}, { DYN_SIDECAR_MAX_CONCURRENT_STREAMS: 'many' }, 'DYN_SIDECAR_MAX_CONCURRENT_STREAMS must be an integer in 1..2147483647, got "many"'],
    [{ idleTimeoutMs: '-1' }, {}, '--idle-timeout-ms must be an integer in 0..2147483647, got "-1"'],
    [{}, { DYN_SIDECAR_IDLE_TIMEOUT_MS: '2147483648' }, 'DYN_SIDECAR_IDLE_TIMEOUT_MS must be an integer in 0..2147483647, got "2147483648"'],
    [{ handshakeTimeoutMs: '99' }, {}, '--handshake-timeout-ms must be an integer in 100..2147483647, got "99"'],
    [{}, { DYN_SIDECAR_HANDSHAKE_TIMEOUT_MS: '1.5' }, 'DYN_SIDECAR_HANDSHAKE_TIMEOUT_MS must be an integer in 100..2147483647, got "1.5"'],
    [{ upstreamConnections: '0' }, {}, '--upstream-connections must be an integer in 1..64, got "0"'],
    [{ upstreamConnections: '65' }, {}, '--upstream-connections must be an integer in 1..64, got "65"'],
    [{}, { DYN_SIDECAR_UPSTREAM_CONNECTIONS: '2.5' }, 'DYN_SIDECAR_UPSTREAM_CONNECTIONS must be an integer in 1..64, got "2.5"'],
    [{ upstreamPingIntervalMs: '0' }, {}, '--upstream-ping-interval-ms must be an integer in 10..3600000, got "0"'],
    [{}, { DYN_SIDECAR_UPSTREAM_PING_TIMEOUT_MS: '5' }, 'DYN_SIDECAR_UPSTREAM_PING_TIMEOUT_MS must be an integer in 10..3600000, got "5"'],
    [{ upstreamKeepaliveIntervalMs: '5' }, {}, '--upstream-keepalive-interval-ms must be an integer in 10..2147483647, got "5"'],
    [{}, { DYN_SIDECAR_UPSTREAM_KEEPALIVE_INTERVAL_MS: '5m' }, 'DYN_SIDECAR_UPSTREAM_KEEPALIVE_INTERVAL_MS must be an integer in 10..2147483647, got "5m"'],
    [{}, { DYN_SIDECAR_UPSTREAM_KEEPALIVE_WITHOUT_CALLS: 'maybe' }, 'DYN_SIDECAR_UPSTREAM_KEEPALIVE_WITHOUT_CALLS must be true or false, got "maybe"'],
    [{ metricsCacheMs: 'x' }, {}, '--metrics-cache-ms must be an integer in 0..600000, got "x"'],
    [{}, { DYN_NATS_LIVENESS_TIMEOUT_MS: '10' }, 'DYN_NATS_LIVENESS_TIMEOUT_MS must be an integer in 50..3600000, got "10"'],
  ] as [Record<string, string>, Record<string, string>, string][])('refuses %j %j naming the flag or variable', (flags, env, message) => {
    expect(problems(flags, env)).toEqual([message]);
  });

  it('each has a flag, an env twin, a default and help in the one option table', () => {
    for (const key of [
      'maxConcurrentStreams',
      'idleTimeoutMs',
      'handshakeTimeoutMs',
      'upstreamConnections',
      'upstreamPingIntervalMs',
      'upstreamPingTimeoutMs',
      'upstreamKeepaliveIntervalMs',
      'metricsCacheMs',
      'natsLivenessTimeoutMs',
    ] as const) {
      const spec = SIDECAR_OPTIONS[key];
      expect(spec.flag).toMatch(/^--[a-z-]+ <(n|k|ms)>$/);
      expect(spec.env).toMatch(/^(DYN_|NATS_)/);
      expect(spec.default).toBeGreaterThan(0);
      expect(spec.help.length).toBeGreaterThan(20);
    }
  });
});
