/**
 * The first NATS connection, retried in the background on a fake clock against a scripted
 * connect function: nats.js's options (reconnect forever, no waitOnFirstConnect), the backoff
 * (100 ms doubling to the cap, plus jitter), one warning however many failures, and cancel()
 * stopping the retries at once and closing a connection that arrives after it.
 */
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Secret } from '../../../src/platform/config/secret.js';
import { connectInBackground, type FirstConnectOptions } from '../../../src/platform/nats-first-connect.js';
import type { NatsSecurity } from '../../../src/platform/nats-security.js';
import { recordingLogger, type RecordingLogger } from '../../support/recording-logger.js';

const WARNING = 'NATS not reachable, retrying in the background';

interface Attempt {
  readonly options: NodeConnectionOptions;
  readonly at: number;
  resolve(nc: NatsConnection): void;
  reject(err: Error): void;
}

/** A connect function whose every call waits for the test to settle it. */
function scripted() {
  const attempts: Attempt[] = [];
  const connect = vi.fn(
    (options: NodeConnectionOptions) =>
      new Promise<NatsConnection>((resolve, reject) => {
        attempts.push({ options, at: Date.now(), resolve, reject });
      }),
  );
  return { attempts, connect };
}

/** A connect function that fails every call at once. */
function refusing() {
  const at: number[] = [];
  const connect = vi.fn(() => {
    at.push(Date.now());
    return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:4222'));
  });
  return { at, connect };
}

const fakeNats = () => ({ close: vi.fn(() => Promise.resolve()) });
const asNats = (nc: ReturnType<typeof fakeNats>) => nc as unknown as NatsConnection;

let logger: RecordingLogger;
let start: number;

beforeEach(() => {
  vi.useFakeTimers();
  vi.spyOn(Math, 'random').mockReturnValue(0);
  logger = recordingLogger();
  start = Date.now();
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

function options(overrides: Partial<FirstConnectOptions>): FirstConnectOptions {
  return {
    servers: ['nats://a:4222', 'nats://b:4222'],
    name: 'dynamo-sidecar',
    reconnectTimeWaitMs: 1000,
    reconnectJitterMs: 500,
    pingIntervalMs: 2000,
    logger,
    ...overrides,
  };
}

/** Settles the connected promise's state without waiting for it: 'pending' or its value. */
async function state<T>(promise: Promise<T>): Promise<T | 'pending'> {
  const pending = Symbol('pending');
  const result = await Promise.race([promise, vi.advanceTimersByTimeAsync(0).then(() => pending)]);
  return result === pending ? 'pending' : (result as T);
}

describe('connectInBackground', () => {
  it('connects with nats.js options that reconnect forever by themselves, and returns the connection', async () => {
    const { attempts, connect } = scripted();
    const first = connectInBackground(options({ connect }));
    expect(attempts).toHaveLength(1);
    expect(attempts[0]!.options).toEqual({
      servers: ['nats://a:4222', 'nats://b:4222'],
      name: 'dynamo-sidecar',
      maxReconnectAttempts: -1,
      reconnectTimeWait: 1000,
      reconnectJitter: 500,
      pingInterval: 2000,
      maxPingOut: 2,
      waitOnFirstConnect: false,
      timeout: 5000,
    });
    const nc = fakeNats();
    attempts[0]!.resolve(asNats(nc));
    await expect(first.connected).resolves.toBe(nc);
    expect(nc.close).not.toHaveBeenCalled();
    expect(logger.lines).toHaveLength(0);
  });

  it('retries after 100 ms, doubling up to reconnectTimeWaitMs, and then at that cap', async () => {
    const { at, connect } = refusing();
    connectInBackground(options({ connect, reconnectTimeWaitMs: 1000, reconnectJitterMs: 0 }));
    await vi.advanceTimersByTimeAsync(100 + 200 + 400 + 800 + 1000 + 1000);
    expect(at.map((t) => t - start)).toEqual([0, 100, 300, 700, 1500, 2500, 3500]);
  });

  it('adds up to reconnectJitterMs of jitter to each wait', async () => {
    vi.mocked(Math.random).mockReturnValue(0.5);
    const { at, connect } = refusing();
    connectInBackground(options({ connect, reconnectTimeWaitMs: 1000, reconnectJitterMs: 300 }));
    await vi.advanceTimersByTimeAsync(249);
    expect(at).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(at).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(200 + 150);
    expect(at.map((t) => t - start)).toEqual([0, 250, 600]);
  });

  it('warns once, at the first failure, with the servers and the error, then retries quietly', async () => {
    const { at, connect } = refusing();
    connectInBackground(options({ connect }));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(at.length).toBeGreaterThan(5);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]).toEqual({
      level: 'warn',
      msg: WARNING,
      fields: { servers: ['nats://a:4222', 'nats://b:4222'], error: 'connect ECONNREFUSED 127.0.0.1:4222' },
    });
  });

  it('returns the connection made after earlier failures', async () => {
    const { attempts, connect } = scripted();
    const first = connectInBackground(options({ connect, reconnectJitterMs: 0 }));
    attempts[0]!.reject(new Error('timeout'));
    await vi.advanceTimersByTimeAsync(100);
    attempts[1]!.reject(new Error('timeout'));
    await vi.advanceTimersByTimeAsync(200);
    const nc = fakeNats();
    attempts[2]!.resolve(asNats(nc));
    await expect(first.connected).resolves.toBe(nc);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(attempts).toHaveLength(3);
  });

  it('cancel() during a wait ends it at once: undefined, and no further attempt', async () => {
    const { at, connect } = refusing();
    const first = connectInBackground(options({ connect }));
    await vi.advanceTimersByTimeAsync(50); // the first wait is 100 ms
    first.cancel();
    expect(await state(first.connected)).toBeUndefined();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(at).toHaveLength(1);
  });

  it('closes a connection that arrives after cancel() and returns undefined', async () => {
    const { attempts, connect } = scripted();
    const first = connectInBackground(options({ connect }));
    first.cancel();
    const nc = fakeNats();
    attempts[0]!.resolve(asNats(nc));
    await expect(first.connected).resolves.toBeUndefined();
    expect(nc.close).toHaveBeenCalledTimes(1);
  });

  it('makes no attempt after cancel() when the attempt in flight then fails', async () => {
    const { attempts, connect } = scripted();
    const first = connectInBackground(options({ connect }));
    first.cancel();
    attempts[0]!.reject(new Error('refused'));
    await vi.advanceTimersByTimeAsync(60_000);
    await expect(first.connected).resolves.toBeUndefined();
    expect(attempts).toHaveLength(1);
  });

  it('ends at once, with no warning, when the attempt in flight fails after cancel()', async () => {
    const { attempts, connect } = scripted();
    const first = connectInBackground(options({ connect, reconnectTimeWaitMs: 5000 }));
    first.cancel();
    attempts[0]!.reject(new Error('refused'));
    expect(await state(first.connected)).toBeUndefined();
    expect(logger.lines, 'a failure after cancel() is no news').toHaveLength(0);
  });

  it('merges the TLS files and authenticator of `security`, and names them (never the secret) in the warning', async () => {
    const security: NatsSecurity = {
      tls: { caFile: 'ca.pem', certFile: 'client.pem', keyFile: 'client.key', serverName: undefined },
      auth: { kind: 'token', token: new Secret('s3cr3t-token') },
    };
    const { attempts, connect } = scripted();
    connectInBackground(options({ connect, security }));
    // The security options load nats.js first (real module loading, not a timer).
    await vi.waitFor(() => expect(attempts).toHaveLength(1));
    const sent = attempts[0]!.options;
    expect(sent).toMatchObject({
      servers: ['nats://a:4222', 'nats://b:4222'],
      maxReconnectAttempts: -1,
      tls: { caFile: 'ca.pem', certFile: 'client.pem', keyFile: 'client.key' },
    });
    expect(typeof sent.authenticator).toBe('function');
    attempts[0]!.reject(new Error('TLS handshake failed'));
    await vi.advanceTimersByTimeAsync(0);
    expect(logger.find(WARNING, 'warn')[0]!.fields).toEqual({
      servers: ['nats://a:4222', 'nats://b:4222'],
      error: 'TLS handshake failed',
      nats_tls: 'on, client certificate',
      nats_auth: 'token',
    });
    expect(JSON.stringify(logger.lines)).not.toContain('s3cr3t-token');
  });

  it('makes no attempt when cancelled before the security options are ready', async () => {
    const { attempts, connect } = scripted();
    const first = connectInBackground(options({ connect, security: { tls: undefined, auth: undefined } }));
    first.cancel();
    await expect(first.connected).resolves.toBeUndefined();
    expect(attempts).toHaveLength(0);
  });
});
