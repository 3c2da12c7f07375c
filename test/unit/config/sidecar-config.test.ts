import { describe, expect, it } from 'vitest';
import { parseHostPort } from '../../../src/config/host-port.js';
import { parseSidecarConfig } from '../../../src/config/sidecar-config.js';
import { problems } from '../../support/config-problems.js';

describe('parseSidecarConfig', () => {
  it('defaults to admission off, queue 16, ingress 0.0.0.0:50050, system port 9090', () => {
    const config = parseSidecarConfig({}, {});
    expect(config).toMatchObject({
      listen: { host: '0.0.0.0', port: 50050 },
      upstream: undefined,
      systemPort: 9090,
      engineRequestLimit: undefined,
      requestQueueLimit: 16,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads the env twins and lets a flag win over its env', () => {
    const env = { DYN_ENGINE_REQUEST_LIMIT: '32', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: '4', DYN_SYSTEM_PORT: '0', DYN_SIDECAR_UPSTREAM: '10.0.0.1:1' };
    expect(parseSidecarConfig({}, env)).toMatchObject({ engineRequestLimit: 32, requestQueueLimit: 4, systemPort: 0, upstream: { host: '10.0.0.1', port: 1 } });
    expect(parseSidecarConfig({ engineRequestLimit: '8', upstream: '[::1]:50051' }, env)).toMatchObject({
      engineRequestLimit: 8,
      upstream: { host: '::1', port: 50051 },
    });
  });

  it('treats an empty environment variable as unset', () => {
    expect(parseSidecarConfig({}, { DYN_ENGINE_REQUEST_LIMIT: '', DYN_DYNAMO_REQUEST_QUEUE_LIMIT: ' ' }).engineRequestLimit).toBeUndefined();
  });

  it.each(['0', '-3', '1.5', 'abc', '1e3', '0x10'])('refuses engine request limit %j, naming the flag or the variable', (value) => {
    expect(problems({ engineRequestLimit: value })).toEqual([`--engine-request-limit must be an integer >= 1, got "${value}"`]);
    expect(problems({}, { DYN_ENGINE_REQUEST_LIMIT: value })).toEqual([`DYN_ENGINE_REQUEST_LIMIT must be an integer >= 1, got "${value}"`]);
  });

  it.each(['1', '0', 'x', '-2', '2.5'])('refuses queue limit %j, naming the variable', (value) => {
    expect(problems({ engineRequestLimit: '4' }, { DYN_DYNAMO_REQUEST_QUEUE_LIMIT: value })).toEqual([
      `DYN_DYNAMO_REQUEST_QUEUE_LIMIT must be an integer >= 2, got "${value}"`,
    ]);
  });

  it('reports every problem at once', () => {
    expect(problems({ listen: 'nope', upstream: 'host:0', systemPort: '70000', logLevel: 'loud' })).toEqual([
      '--listen: expected HOST:PORT (e.g. 127.0.0.1:50051 or [::1]:50051), got "nope"',
      '--upstream: port must be 1-65535, got 0',
      '--system-port must be an integer in 0..65535, got "70000"',
      '--log-level must be one of debug, info, warn, error, got "loud"',
    ]);
  });
});

describe('parseHostPort', () => {
  it('accepts names, IPv4 and bracketed IPv6; refuses the rest', () => {
    expect(parseHostPort('localhost:1', false)).toEqual({ host: 'localhost', port: 1 });
    expect(parseHostPort('[::1]:0', true)).toEqual({ host: '::1', port: 0 });
    for (const bad of ['::1:80', 'host', ':80', 'host:', 'host:99999', 'a b:1', 'host:-1']) expect(typeof parseHostPort(bad, true)).toBe('string');
  });
});
