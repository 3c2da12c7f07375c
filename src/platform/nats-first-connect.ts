/**
 * The first connection to NATS, retried in the background with exponential backoff (100 ms
 * doubling up to `reconnectTimeWaitMs`, plus up to `reconnectJitterMs`), so a broker that is down at startup neither
 * blocks nor crashes startup, and the caller's close() can stop it: nats.js's own
 * waitOnFirstConnect loop cannot be cancelled. After the first connect nats.js reconnects by
 * itself, forever (maxReconnectAttempts -1). The first failure is logged once, never
 * each attempt; server URLs go through the logger, which redacts credentials. TLS and
 * authentication come from `security` (nats-security.ts); nats.js reads their files at every
 * connection, so a rotated certificate or credentials file is used from the next one.
 */
import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import type { Logger } from './log.js';
import { describeNatsSecurity, natsConnectionSecurity, type NatsSecurity } from './nats-security.js';

export type NatsConnectFn = (options: NodeConnectionOptions) => Promise<NatsConnection>;

export interface FirstConnectOptions {
  readonly servers: string | string[];
  /** Client name shown by the server's monitoring. */
  readonly name: string;
  /** Cap of the first-connect backoff, and nats.js's wait between its own reconnects. */
  readonly reconnectTimeWaitMs: number;
  readonly reconnectJitterMs: number;
  /** nats.js's liveness check: a connection whose server leaves two PINGs this far apart unanswered is dropped. */
  readonly pingIntervalMs: number;
  readonly logger: Logger;
  /** TLS files and authentication (nats-security.ts); default none. */
  readonly security?: NatsSecurity | undefined;
  /** Replaceable for tests. */
  readonly connect?: NatsConnectFn | undefined;
}

export interface FirstConnect {
  /** The connection, or undefined when cancelled first. */
  readonly connected: Promise<NatsConnection | undefined>;
  /** Stops retrying; a connection made after this is closed at once. */
  cancel(): void;
}

/** nats.js is loaded with the first connection, so a process that never connects never loads it. */
const natsConnect: NatsConnectFn = async (options) => (await import('@nats-io/transport-node')).connect(options);

export function connectInBackground(options: FirstConnectOptions): FirstConnect {
  const connectFn = options.connect ?? natsConnect;
  const base: NodeConnectionOptions = {
    servers: options.servers,
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: options.reconnectTimeWaitMs,
    reconnectJitter: options.reconnectJitterMs,
    pingInterval: options.pingIntervalMs,
    maxPingOut: 2,
    waitOnFirstConnect: false,
    timeout: 5000,
  };
  let cancelled = false;
  let wake: (() => void) | undefined;
  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      wake = done;
    });
  const connected = (async (): Promise<NatsConnection | undefined> => {
    const connection: NodeConnectionOptions = options.security ? { ...base, ...(await natsConnectionSecurity(options.security)) } : base;
    for (let attempt = 0; !cancelled; attempt++) {
      try {
        const nc = await connectFn(connection);
        if (!cancelled) return nc;
        await nc.close();
        return undefined;
      } catch (err) {
        if (cancelled) break; // an attempt that fails after cancel() is no news, and waits for nothing
        if (attempt === 0)
          options.logger.warn('NATS not reachable, retrying in the background', {
            servers: options.servers,
            error: (err as Error).message,
            ...(options.security ? describeNatsSecurity(options.security) : {}),
          });
        await sleep(Math.min(options.reconnectTimeWaitMs, 100 * 2 ** attempt) + Math.random() * options.reconnectJitterMs);
      }
    }
    return undefined;
  })();
  return {
    connected,
    cancel: () => {
      cancelled = true;
      wake?.();
    },
  };
}
