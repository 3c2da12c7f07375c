import { connect, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { type LoadEvent } from '../../../../src/protocol/load-event.js';
import { LoadPublisher } from '../../../../src/sidecar/load/publisher.js';
import { loadSubject } from '../../../../src/protocol/load-event.js';
import type { Logger } from '../../../../src/platform/log.js';
import { waitFor } from '../../../support/wait.js';
import { startNatsServer, type NatsServerHandle } from '../../../support/nats-server.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function messages(): { logger: Logger; msgs: string[] } {
  const msgs: string[] = [];
  const make = (): Logger => ({ debug: () => {}, info: (m) => msgs.push(m), warn: (m) => msgs.push(m), error: (m) => msgs.push(m), child: () => make() });
  return { logger: make(), msgs };
}

/** Wraps the real connect so the test sees every publish call the publisher makes. */
function spyingConnect(calls: { payload: string; connected: boolean }[], isConnected: () => boolean) {
  return async (options: NodeConnectionOptions): Promise<NatsConnection> => {
    const nc = await connect(options);
    const publish = nc.publish.bind(nc);
    nc.publish = (subject, payload, opts) => {
      calls.push({ payload: String(payload), connected: isConnected() });
      publish(subject, payload, opts);
    };
    return nc;
  };
}

async function subscriber(nats: NatsServerHandle, subject: string): Promise<LoadEvent[]> {
  const got: LoadEvent[] = [];
  const nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 50, reconnectJitter: 0 });
  cleanups.push(() => nc.close());
  nc.subscribe(subject, { callback: (_e, m) => void got.push(m.json<LoadEvent>()) });
  await nc.flush();
  return got;
}

describe('LoadPublisher across broker outages', () => {
  it('makes no publish calls while disconnected and publishes the current state first after reconnecting', async () => {
    const nats = await startNatsServer();
    cleanups.push(() => nats.stop());
    const subject = loadSubject('ns', 'outage', 'generate');
    const got = await subscriber(nats, subject);
    const tracker = new LoadTracker({ workerId: 5 });
    const calls: { payload: string; connected: boolean }[] = [];
    const { logger, msgs } = messages();
    const p: LoadPublisher = new LoadPublisher({
      servers: nats.url,
      subject,
      source: tracker,
      logger,
      heartbeatMs: 50,
      reconnectTimeWaitMs: 100,
      reconnectJitterMs: 20,
      connect: spyingConnect(calls, () => p.connected),
    });
    cleanups.push(() => p.close());
    p.start();
    await waitFor(() => got.length >= 2, 'two heartbeats reaching the subscriber');

    await nats.stop();
    await waitFor(() => !p.connected, 'the publisher to see the broker gone');
    const before = calls.length;
    const failuresBefore = p.stats.failures;
    const call = tracker.callStarted(0, 123); // state changes while the broker is gone
    tracker.setDraining(true);
    await sleep(400); // several heartbeats and debounces
    expect(calls.length).toBe(before);
    expect(p.stats.failures).toBeGreaterThan(failuresBefore);

    await nats.restart();
    await waitFor(() => p.connected, 'the publisher to reconnect');
    expect(calls.length).toBeGreaterThan(before);
    expect(JSON.parse(calls[before]!.payload)).toMatchObject({ active_prefill_tokens: 123, draining: true });
    expect(calls.every((c) => c.connected)).toBe(true);
    await waitFor(() => got.some((e) => e.active_prefill_tokens === 123), 'the state changed during the outage at the subscriber');
    call.end();
    expect(msgs.filter((m) => m.startsWith('NATS disconnected'))).toHaveLength(1);
    expect(msgs).toContain('NATS reconnected');
  });

  it('starts without a broker, does not throw, and connects once the broker comes up', async () => {
    const nats = await startNatsServer({ start: false });
    cleanups.push(() => nats.stop());
    const tracker = new LoadTracker({ workerId: 6, kvTotalBlocks: 10 });
    const { logger, msgs } = messages();
    const p = new LoadPublisher({
      servers: nats.url,
      subject: loadSubject('ns', 'late', 'generate'),
      source: tracker,
      logger,
      heartbeatMs: 50,
      reconnectTimeWaitMs: 100,
      reconnectJitterMs: 20,
    });
    cleanups.push(() => p.close());
    expect(() => p.start()).not.toThrow();
    await sleep(400); // deliberate: several reconnect attempts (100 ms apart), which must warn only once
    expect(p.state).toBe('connecting');
    expect(msgs.filter((m) => m.startsWith('NATS not reachable'))).toHaveLength(1);

    await nats.restart();
    const got = await subscriber(nats, loadSubject('ns', 'late', 'generate'));
    await waitFor(() => p.connected, 'the publisher to connect to the late broker');
    await waitFor(() => got.length > 0, 'a first event at the subscriber');
    expect(got[0]).toMatchObject({ worker_id: 6, kv_total_blocks: 10 });
  });

  it('close() stops the retry loop of a publisher whose broker never came up', async () => {
    // Two publishers retry against a refusing connect; the control one keeps going, so its
    // attempts measure time passing without a sleep.
    const attempts = { closed: 0, control: 0 };
    const make = (who: keyof typeof attempts): LoadPublisher =>
      new LoadPublisher({
        servers: 'nats://127.0.0.1:1',
        subject: 'x',
        source: new LoadTracker({ workerId: 1 }),
        logger: messages().logger,
        reconnectTimeWaitMs: 50,
        reconnectJitterMs: 0,
        connect: () => {
          attempts[who]++;
          return Promise.reject(new Error('connection refused'));
        },
      });
    const p = make('closed');
    const control = make('control');
    cleanups.push(() => control.close());
    p.start();
    control.start();
    await waitFor(() => attempts.closed >= 3, 'a few connect attempts');
    await p.close();
    const afterClose = attempts.closed;
    const controlAtClose = attempts.control;
    await waitFor(() => attempts.control >= controlAtClose + 5, 'five more attempts of the control publisher');
    expect(attempts.closed).toBe(afterClose);
    expect(p.state).toBe('closed');
  });

  it('close() on a connected publisher closes its connection and publishes nothing afterwards', async () => {
    const nats = await startNatsServer();
    cleanups.push(() => nats.stop());
    const subject = loadSubject('ns', 'closing', 'generate');
    const got = await subscriber(nats, subject);
    const calls: { payload: string; connected: boolean }[] = [];
    const connections: NatsConnection[] = [];
    const spy = spyingConnect(calls, () => true);
    const tracker = new LoadTracker({ workerId: 8 });
    const p = new LoadPublisher({
      servers: nats.url,
      subject,
      source: tracker,
      logger: messages().logger,
      heartbeatMs: 50,
      connect: async (o) => {
        const nc = await spy(o);
        connections.push(nc);
        return nc;
      },
    });
    cleanups.push(() => p.close());
    p.start();
    await waitFor(() => got.length >= 2, 'heartbeats reaching the subscriber');
    await p.close();
    expect(connections).toHaveLength(1);
    expect(connections[0]!.isClosed()).toBe(true);
    const callsAtClose = calls.length;
    const receivedAtClose = got.length;
    tracker.callStarted(0, 5); // a change that would be published if anything were still running
    p.publishNow();
    // A control publisher on the same subject: once its heartbeats arrive, any heartbeat or
    // debounced publish of the closed one would have arrived too.
    const control = new LoadPublisher({ servers: nats.url, subject, source: new LoadTracker({ workerId: 99 }), logger: messages().logger, heartbeatMs: 50 });
    cleanups.push(() => control.close());
    control.start();
    await waitFor(() => got.filter((e) => e.worker_id === 99).length >= 3, 'three heartbeats of the control publisher');
    expect(calls.length).toBe(callsAtClose);
    expect(got.slice(receivedAtClose).filter((e) => e.worker_id === 8)).toEqual([]);
  });
});
