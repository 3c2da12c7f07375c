// The NATS load publisher against a fake connection and a fake clock: when it publishes, how it counts, how it reads liveness.
import type { NatsConnection } from '@nats-io/transport-node';
import { Unpackr } from 'msgpackr';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LoadEvent } from '../../../../src/protocol/load-event.js';
import { defaultWorkerId, LoadPublisher, type LoadPublisherOptions, type LoadSource } from '../../../../src/sidecar/load/publisher.js';
import { recordingLogger, type RecordingLogger } from '../../../support/recording-logger.js';

const SUBJECT = 'namespace.dynamo.component.backend.endpoint.generate.kv_metrics';

/** The part of a nats.js connection the publisher uses; the test settles each flush (PING/PONG) itself. */
class FakeNats {
  readonly published: { subject: string; data: string | Uint8Array }[] = [];
  readonly flushes: { resolve: () => void; reject: (e: Error) => void }[] = [];
  publishThrows = false;
  drains = 0;
  closes = 0;
  private isClosedFlag = false;
  private readonly statuses: object[] = [];
  private waiter: ((r: IteratorResult<object>) => void) | undefined;
  private resolveClosed!: () => void;
  private readonly closedPromise = new Promise<void>((resolve) => (this.resolveClosed = resolve));

  publish(subject: string, data: string | Uint8Array): void {
    if (this.publishThrows) throw new Error('publish failed');
    this.published.push({ subject, data });
  }
  flush(): Promise<void> {
    return new Promise((resolve, reject) => this.flushes.push({ resolve, reject }));
  }
  status(): AsyncIterable<object> {
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => {
          const s = this.statuses.shift();
          if (s !== undefined) return Promise.resolve({ value: s, done: false });
          if (this.isClosedFlag) return Promise.resolve({ value: undefined, done: true });
          return new Promise<IteratorResult<object>>((resolve) => (this.waiter = resolve));
        },
      }),
    };
  }
  emitStatus(status: object): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter) waiter({ value: status, done: false });
    else this.statuses.push(status);
  }
  closed(): Promise<void> {
    return this.closedPromise;
  }
  isClosed(): boolean {
    return this.isClosedFlag;
  }
  drain(): Promise<void> {
    this.drains++;
    return this.close();
  }
  close(): Promise<void> {
    this.closes++;
    this.closeForGood();
    return Promise.resolve();
  }
  /** Closed by nats.js itself (e.g. repeated auth errors), not through close(). */
  closeForGood(): void {
    this.isClosedFlag = true;
    this.resolveClosed();
    this.waiter?.({ value: undefined, done: true });
  }
  getServer(): string {
    return '127.0.0.1:4222';
  }
  /** Answers every probe waiting. */
  pong(): void {
    for (const f of this.flushes.splice(0)) f.resolve();
  }
}

function event(dpRank = 0): LoadEvent {
  return {
    worker_id: 7,
    dp_rank: dpRank,
    active_decode_blocks: 1,
    active_prefill_tokens: 2,
    kv_used_blocks: null,
    kv_total_blocks: null,
    max_num_batched_tokens: null,
    engine_request: 0,
    request_queue: 0,
    engine_request_limit: null,
    overloaded: false,
    overloaded_priority: null,
    overloaded_tenants: null,
    draining: false,
    timestamp_ms: 0,
    sequence: 0,
    model: 'm',
    grpc_address: '127.0.0.1:9000',
    heartbeat_ms: 1000,
    predicted_ttft_ms: null,
  };
}

/** A tracker stand-in: a snapshot of `ranks` events, and change listeners the test fires. */
function fakeSource(ranks = 1): LoadSource & { change: () => void; listeners: number } {
  const listeners = new Set<() => void>();
  return {
    snapshot: () => Array.from({ length: ranks }, (_, i) => event(i)),
    onChange: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    change: () => listeners.forEach((l) => l()),
    get listeners() {
      return listeners.size;
    },
  };
}

let nats: FakeNats[];
let logger: RecordingLogger;
let publisher: LoadPublisher | undefined;

beforeEach(() => {
  vi.useFakeTimers();
  nats = [];
  logger = recordingLogger();
});
afterEach(async () => {
  await publisher?.close();
  publisher = undefined;
  vi.useRealTimers();
});

/** Lets promise callbacks run, and advances the fake clock by `ms`. */
const tick = (ms = 0) => vi.advanceTimersByTimeAsync(ms);

async function connected(
  options: Partial<LoadPublisherOptions> = {},
  source = fakeSource(),
): Promise<{ p: LoadPublisher; nc: FakeNats; source: typeof source }> {
  const p = new LoadPublisher({
    servers: 'nats://127.0.0.1:4222',
    subject: SUBJECT,
    source,
    logger,
    connect: () => {
      const nc = new FakeNats();
      nats.push(nc);
      return Promise.resolve(nc as unknown as NatsConnection);
    },
    ...options,
  });
  publisher = p;
  p.start();
  await tick();
  return { p, nc: nats.at(-1)!, source };
}

describe('defaultWorkerId', () => {
  it('is a stable safe integer per host and port', () => {
    const id = defaultWorkerId('host-a', 9000);
    expect(defaultWorkerId('host-a', 9000)).toBe(id);
    expect(Number.isSafeInteger(id)).toBe(true);
    expect(id).toBeGreaterThanOrEqual(0);
    expect(defaultWorkerId('host-a', 9001)).not.toBe(id);
    expect(defaultWorkerId('host-b', 9000)).not.toBe(id);
  });
});

describe('LoadPublisher', () => {
  it('publishes the snapshot, one JSON message per rank, as soon as it connects', async () => {
    const { p, nc } = await connected({}, fakeSource(2));
    expect(p.state).toBe('connected');
    expect(p.connected).toBe(true);
    expect(p.stats.connects).toBe(1);
    expect(nc.published.map(({ subject, data }) => ({ subject, event: JSON.parse(data as string) as LoadEvent }))).toEqual([
      { subject: SUBJECT, event: event(0) },
      { subject: SUBJECT, event: event(1) },
    ]);
    expect(logger.find('NATS connected', 'info')[0]!.fields).toMatchObject({ subject: SUBJECT, server: '127.0.0.1:4222' });
    expect(p.publisherId).toBeUndefined();
  });

  it('counts events as published only once the server answers the probe', async () => {
    const { p, nc } = await connected({}, fakeSource(2));
    expect(p.pending).toBe(2);
    expect(p.stats.published).toBe(0);
    nc.pong();
    await tick();
    expect(p.stats).toMatchObject({ published: 2, failures: 0 });
    expect(p.pending).toBe(0);
  });

  it('runs one probe at a time: events handed over during a probe wait for the next one', async () => {
    const { p, nc } = await connected();
    p.publishNow();
    p.publishNow();
    expect(nc.flushes).toHaveLength(1);
    expect(p.pending).toBe(3);
    nc.pong();
    await tick();
    expect(p.stats.published).toBe(1);
    expect(nc.flushes).toHaveLength(1);
    nc.pong();
    await tick();
    expect(p.stats.published).toBe(3);
  });

  it('turns a burst of changes into one publish after the debounce', async () => {
    const { nc, source } = await connected({ debounceMs: 20 });
    const before = nc.published.length;
    source.change();
    source.change();
    await tick(19);
    expect(nc.published.length).toBe(before);
    source.change();
    await tick(1);
    expect(nc.published.length).toBe(before + 1);
  });

  it('publishes on the heartbeat, counted from the last publish', async () => {
    const { p, nc } = await connected({ heartbeatMs: 1000 });
    const before = nc.published.length;
    await tick(600);
    p.publishNow();
    await tick(999);
    expect(nc.published.length).toBe(before + 1);
    await tick(1);
    expect(nc.published.length).toBe(before + 2);
  });

  it('publishes nothing and counts a failure when asked before it is connected', () => {
    const p = new LoadPublisher({ servers: 'nats://x:1', subject: SUBJECT, source: fakeSource(), logger, connect: () => new Promise(() => {}) });
    publisher = p;
    p.publishNow();
    expect(p.stats.failures).toBe(1);
    expect(p.state).toBe('idle');
  });

  it('counts a publish that throws as a failure and does not advance the dynamo sequence', async () => {
    const unpack = new Unpackr({ useRecords: false, int64AsType: 'number' });
    const { p, nc } = await connected({ format: 'dynamo' });
    expect(p.publisherId).toBeDefined();
    nc.publishThrows = true;
    p.publishNow();
    expect(p.stats.failures).toBe(1);
    nc.publishThrows = false;
    p.publishNow();
    const envelopes = nc.published.map(({ data }) => unpack.unpack(data as Uint8Array) as { publisher_id: number; sequence: number; topic: string });
    expect(envelopes.map((e) => e.sequence)).toEqual([0, 1]);
    expect(envelopes.every((e) => e.publisher_id === p.publisherId && e.topic === 'kv_metrics')).toBe(true);
  });

  it('goes stalled when a probe is not answered within the liveness timeout, counting its events as failures', async () => {
    const { p, nc } = await connected({ livenessTimeoutMs: 500, heartbeatMs: 60_000 }, fakeSource(2));
    await tick(499);
    expect(p.state).toBe('connected');
    await tick(1);
    expect(p.state).toBe('stalled');
    expect(p.connected).toBe(false);
    expect(p.stats).toMatchObject({ published: 0, failures: 2 });
    expect(logger.find('NATS not confirming publishes; load events paused until it answers', 'warn')).toHaveLength(1);

    // While stalled nothing more reaches the socket.
    const sent = nc.published.length;
    p.publishNow();
    expect(nc.published.length).toBe(sent);
    expect(p.stats.failures).toBe(3);
  });

  it('leaves stalled when the late answer arrives, and publishes the snapshot at once', async () => {
    const { p, nc } = await connected({ livenessTimeoutMs: 500, heartbeatMs: 60_000 });
    await tick(500);
    expect(p.state).toBe('stalled');
    const sent = nc.published.length;
    nc.pong();
    await tick();
    expect(p.state).toBe('connected');
    expect(nc.published.length).toBe(sent + 1);
    // The late answer does not count the timed-out batch twice.
    expect(p.stats).toMatchObject({ published: 0, failures: 1 });
    expect(logger.find('NATS answering again', 'info')).toHaveLength(1);
  });

  it('counts a probe that fails as failures, without stalling', async () => {
    const { p, nc } = await connected();
    nc.flushes[0]!.reject(new Error('connection closed'));
    await tick();
    expect(p.stats).toMatchObject({ published: 0, failures: 1 });
    expect(p.state).toBe('connected');
  });

  it('on disconnect, pauses and gives up unprobed events; on reconnect, publishes at once', async () => {
    const { p, nc } = await connected();
    p.publishNow();
    expect(p.pending).toBe(2);
    nc.emitStatus({ type: 'disconnect', server: 'a:1' });
    await tick();
    expect(p.state).toBe('disconnected');
    expect(p.stats).toMatchObject({ disconnects: 1, failures: 1 });
    expect(logger.find('NATS disconnected; load events paused until reconnection', 'warn')[0]!.fields).toMatchObject({ server: 'a:1' });
    const sent = nc.published.length;
    p.publishNow();
    expect(nc.published.length).toBe(sent);

    nc.emitStatus({ type: 'reconnecting' });
    await tick();
    expect(p.state).toBe('reconnecting');
    nc.emitStatus({ type: 'reconnect', server: 'b:1' });
    await tick();
    expect(p.state).toBe('connected');
    expect(p.stats.connects).toBe(2);
    expect(nc.published.length).toBe(sent + 1);
    expect(logger.find('NATS reconnected', 'info')).toHaveLength(1);
  });

  it('connects again from scratch when nats.js closes the connection by itself', async () => {
    const { p, nc } = await connected();
    nc.closeForGood();
    await tick();
    expect(nats).toHaveLength(2);
    expect(p.state).toBe('connected');
    expect(p.stats.connects).toBe(2);
  });

  it('on close, drains a connected client, stops listening to the source, and publishes no more', async () => {
    const { p, nc, source } = await connected({ debounceMs: 5 });
    expect(source.listeners).toBe(1);
    await p.close();
    expect(p.state).toBe('closed');
    expect(nc.drains).toBe(1);
    expect(source.listeners).toBe(0);
    const failures = p.stats.failures;
    p.publishNow();
    await tick(5000);
    expect(nc.published).toHaveLength(1);
    expect(p.stats.failures).toBe(failures);
    expect(logger.find('NATS publisher closed', 'info')).toHaveLength(1);
  });

  it('closes without draining a stalled client', async () => {
    const { p, nc } = await connected({ livenessTimeoutMs: 100, heartbeatMs: 60_000 });
    await tick(100);
    await p.close();
    expect(nc.drains).toBe(0);
    expect(nc.closes).toBe(1);
  });

  it('starts once: a second start() neither connects nor subscribes again', async () => {
    const { p, source } = await connected();
    p.start();
    await tick();
    expect(nats).toHaveLength(1);
    expect(source.listeners).toBe(1);
  });
});
