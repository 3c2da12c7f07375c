/**
 * A hung broker (nats-server stopped with SIGSTOP: process alive, TCP open, nothing answered)
 * must read disconnected within a few seconds, and events sent into it must not count as
 * published; after SIGCONT events flow and count again.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { registerLoadMetrics } from '../../../../src/sidecar/load/load-metrics.js';
import { LoadTracker } from '../../../../src/sidecar/load/load-tracker.js';
import { type LoadEvent } from '../../../../src/protocol/load-event.js';
import { LoadPublisher } from '../../../../src/sidecar/load/publisher.js';
import { loadSubject } from '../../../../src/protocol/load-event.js';
import { startNatsServer } from '../../../support/nats-server.js';
import { recordingLogger } from '../../../support/recording-logger.js';
import { waitFor } from '../../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
});

const gauge = async (registry: Registry, name: string): Promise<number> => {
  const line = (await registry.metrics()).split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
};

describe('LoadPublisher with a hung broker', () => {
  it('reads disconnected within a few seconds of SIGSTOP, counts nothing as published while stopped, and flows again after SIGCONT', async () => {
    const nats = await startNatsServer();
    cleanups.push(() => nats.stop());
    const subject = loadSubject('ns', 'liveness', 'generate');
    const sub: NatsConnection = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    cleanups.push(() => sub.close());
    const got: LoadEvent[] = [];
    sub.subscribe(subject, { callback: (_e, m) => void got.push(m.json<LoadEvent>()) });
    await sub.flush();

    const logger = recordingLogger();
    const tracker = new LoadTracker({ workerId: 9 });
    const p = new LoadPublisher({
      servers: nats.url,
      subject,
      source: tracker,
      logger,
      heartbeatMs: 100,
      livenessTimeoutMs: 500,
      reconnectTimeWaitMs: 100,
      reconnectJitterMs: 20,
    });
    cleanups.push(() => p.close());
    const registry = new Registry();
    registerLoadMetrics(registry, tracker, undefined, p);
    p.start();
    await waitFor(() => p.connected && p.stats.published >= 3, 'a few confirmed heartbeats');
    expect(await gauge(registry, 'dynamo_sidecar_nats_connected')).toBe(1);
    expect(got.length).toBeGreaterThan(0);

    nats.pause();
    const stoppedAt = Date.now();
    const publishedAtStop = p.stats.published;
    await waitFor(() => !p.connected, 'the publisher to notice the hung broker', 10_000);
    // heartbeat (100 ms) + liveness timeout (500 ms), with slack for a loaded machine.
    expect(Date.now() - stoppedAt).toBeLessThan(4000);
    expect(await gauge(registry, 'dynamo_sidecar_nats_connected')).toBe(0);
    // At most the probe whose PONG was already on its way when the signal landed.
    expect(p.stats.published - publishedAtStop).toBeLessThanOrEqual(1);
    const publishedWhileStopped = p.stats.published;
    const failuresBefore = p.stats.failures;
    tracker.callStarted(0, 77); // state changes while the broker hangs
    await waitFor(() => p.stats.failures >= failuresBefore + 5, 'several heartbeats to be skipped while stopped');
    expect(p.stats.published).toBe(publishedWhileStopped);
    expect(await gauge(registry, 'dynamo_sidecar_load_events_published_total')).toBe(publishedWhileStopped);
    // Nothing is handed to the hung socket, and what was handed over is given up, not pending.
    expect(await gauge(registry, 'dynamo_sidecar_load_events_unconfirmed')).toBe(0);

    nats.resume();
    await waitFor(() => p.connected, 'the publisher to reconnect after SIGCONT', 15_000);
    await waitFor(() => p.stats.published > publishedWhileStopped, 'confirmed publishes again', 10_000);
    await waitFor(() => got.some((e) => e.active_prefill_tokens === 77), 'the current state to reach a subscriber', 10_000);
    expect(await gauge(registry, 'dynamo_sidecar_nats_connected')).toBe(1);
    expect(logger.lines.some(({ msg }) => msg.startsWith('NATS not confirming publishes') || msg.startsWith('NATS disconnected'))).toBe(true);
  });
});
