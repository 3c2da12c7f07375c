/** Logs never carry URL credentials, whoever logs them and wherever they appear in a line. */
import { describe, expect, it } from 'vitest';
import { createLogger, redactUrlCredentials } from '../../../src/platform/log.js';

describe('redactUrlCredentials', () => {
  it.each([
    ['nats://user:pass@host:4222', 'nats://user:***@host:4222'],
    ['nats://tok@host:4222', 'nats://***@host:4222'],
    ['tls://a:b@h1:4222,nats://t0k3n@h2:4222,nats://h3:4222', 'tls://a:***@h1:4222,nats://***@h2:4222,nats://h3:4222'],
    ['http://admin:s3cr3t@engine:8000/metrics', 'http://admin:***@engine:8000/metrics'],
    ['fetch failed for https://u:p%40ss@x/metrics: refused', 'fetch failed for https://u:***@x/metrics: refused'],
    ['NATS://User:Pw@Host', 'NATS://User:***@Host'],
    ['nats://user:@host', 'nats://user:***@host'],
  ])('%s -> %s', (input, expected) => {
    expect(redactUrlCredentials(input)).toBe(expected);
  });

  it.each(['nats://127.0.0.1:4222', '127.0.0.1:4222', 'mail me at ops@example.com', 'http://host/path?a=b@c', ''])('leaves %j alone', (text) => {
    expect(redactUrlCredentials(text)).toBe(text);
  });
});

describe('createLogger', () => {
  it('redacts credentials in the message and in fields at any depth', () => {
    const lines: string[] = [];
    const logger = createLogger({ sink: { write: (l: string) => lines.push(l) }, now: () => 0 }).child({ nats: 'nats://svc:pw@broker:4222' });
    logger.warn('cannot reach nats://tok@broker:4222', { servers: ['nats://a:b@h:1', 'nats://h:2'], error: { message: 'at http://u:p@e/metrics' }, count: 3 });
    expect(lines).toHaveLength(1);
    const text = lines[0]!;
    expect(text).not.toMatch(/pw|tok@|:b@|:p@/);
    expect(JSON.parse(text)).toMatchObject({
      msg: 'cannot reach nats://***@broker:4222',
      nats: 'nats://svc:***@broker:4222',
      servers: ['nats://a:***@h:1', 'nats://h:2'],
      error: { message: 'at http://u:***@e/metrics' },
      count: 3,
    });
  });
});
