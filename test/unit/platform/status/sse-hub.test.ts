/** SseHub under fake timers with fake responses: one snapshot per tick for all clients, the client cap, leaving, slow readers, close. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SSE_HEADERS, SseHub } from '../../../../src/platform/status/sse-hub.js';
import { FakeSseResponse } from '../../../support/fake-sse-response.js';

afterEach(() => {
  vi.useRealTimers();
});

function hub(maxClients = 3, maxBufferedBytes?: number) {
  let n = 0;
  const sample = vi.fn();
  const snapshot = vi.fn(() => ({ n: ++n }));
  const sse = new SseHub({ intervalMs: 1000, maxClients, sample, snapshot, ...(maxBufferedBytes !== undefined && { maxBufferedBytes }) });
  return { sse, sample, snapshot };
}

describe('SseHub', () => {
  it('computes one snapshot per tick and writes the same frame to every client', async () => {
    vi.useFakeTimers();
    const { sse, snapshot } = hub();
    const clients = [new FakeSseResponse(), new FakeSseResponse(), new FakeSseResponse()];
    for (const c of clients) expect(sse.attach(c.asResponse())).toBe(true);
    await vi.advanceTimersByTimeAsync(3000);
    // One for the first client's arrival, then one per tick.
    expect(snapshot).toHaveBeenCalledTimes(4);
    expect(sse.counts).toEqual({ ticks: 3, snapshots: 4 });
    expect(clients[0]!.status).toBe(200);
    expect(clients[0]!.headers).toEqual(SSE_HEADERS);
    expect(clients[0]!.writes[0]).toBe('retry: 1000\n\n');
    expect(clients[0]!.frames()).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
    // Later clients get the current snapshot at once, then the same ticks.
    expect(clients[2]!.frames()).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }]);
    sse.close();
  });

  it('refuses a client beyond the cap without writing to it', () => {
    const { sse } = hub(1);
    expect(sse.attach(new FakeSseResponse().asResponse())).toBe(true);
    const refused = new FakeSseResponse();
    expect(sse.attach(refused.asResponse())).toBe(false);
    expect(refused.status).toBeUndefined();
    expect(refused.writes).toEqual([]);
    sse.close();
  });

  it('forgets a client whose connection closed, and computes no snapshot while nobody watches (but keeps sampling)', async () => {
    vi.useFakeTimers();
    const { sse, sample, snapshot } = hub();
    const client = new FakeSseResponse();
    sse.attach(client.asResponse());
    await vi.advanceTimersByTimeAsync(1000);
    client.emit('close');
    expect(sse.clientCount).toBe(0);
    snapshot.mockClear();
    await vi.advanceTimersByTimeAsync(5000);
    expect(snapshot).not.toHaveBeenCalled();
    expect(sample).toHaveBeenCalledTimes(6);
    sse.close();
  });

  it('cuts off a client that stopped reading', async () => {
    vi.useFakeTimers();
    const { sse } = hub(3, 100);
    const slow = new FakeSseResponse();
    const fast = new FakeSseResponse();
    sse.attach(slow.asResponse());
    sse.attach(fast.asResponse());
    slow.writableLength = 101;
    await vi.advanceTimersByTimeAsync(1000);
    expect(slow.destroyed).toBe(true);
    expect(sse.clientCount).toBe(1);
    expect(fast.frames().length).toBeGreaterThan(1);
    sse.close();
  });

  it('ends every stream on close, stops ticking, and refuses new clients', async () => {
    vi.useFakeTimers();
    const { sse, sample } = hub();
    const client = new FakeSseResponse();
    sse.attach(client.asResponse());
    sse.close();
    expect(client.ended).toBe(true);
    sample.mockClear();
    await vi.advanceTimersByTimeAsync(5000);
    expect(sample).not.toHaveBeenCalled();
    expect(sse.attach(new FakeSseResponse().asResponse())).toBe(false);
  });

  it('reports a tick that throws and goes on at the next one', async () => {
    vi.useFakeTimers();
    const errors: string[] = [];
    let fail = true;
    const sse = new SseHub({
      intervalMs: 1000,
      maxClients: 2,
      snapshot: () => {
        if (fail) throw new Error('boom');
        return { ok: true };
      },
      onError: (e) => errors.push(e.message),
    });
    const client = new FakeSseResponse();
    sse.attach(client.asResponse());
    await vi.advanceTimersByTimeAsync(0);
    fail = false;
    await vi.advanceTimersByTimeAsync(1000);
    expect(errors).toEqual(['boom']);
    expect(client.frames()).toEqual([{ ok: true }]);
    sse.close();
  });
});
