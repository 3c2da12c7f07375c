import { describe, expect, it } from 'vitest';
import { LoadTracker, parseDpRankHeader } from '../../../../src/sidecar/load/load-tracker.js';
import { type LoadEvent } from '../../../../src/protocol/load-event.js';

const clock = (start = 1_000_000): { now: () => number; advance: (ms: number) => void } => {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
};
const rank0 = (t: LoadTracker): LoadEvent => t.peek()[0]!;

describe('LoadTracker traffic accounting', () => {
  it('counts prompt tokens as prefill until the first output, then only as decode blocks', () => {
    const t = new LoadTracker({ workerId: 7, kvBlockSize: 16 });
    const a = t.callStarted(0, 40, 100);
    const b = t.callStarted(0, 10);
    expect(rank0(t)).toMatchObject({ active_prefill_tokens: 50, active_decode_blocks: 3 + 1 });
    a.output(1);
    expect(rank0(t)).toMatchObject({ active_prefill_tokens: 10, active_decode_blocks: 4 });
    b.output(0); // any response message ends prefill
    expect(rank0(t).active_prefill_tokens).toBe(0);
  });

  it('adds output tokens to decode blocks only with trackOutputBlocks', () => {
    for (const track of [false, true]) {
      const t = new LoadTracker({ workerId: 1, kvBlockSize: 16, trackOutputBlocks: track });
      const c = t.callStarted(0, 16);
      c.output(1);
      c.output(15);
      expect(rank0(t).active_decode_blocks).toBe(track ? 2 : 1);
      c.output(20, { cumulative: true }); // a cumulative total replaces the delta sum
      expect(rank0(t).active_decode_blocks).toBe(track ? 3 : 1);
      c.output(5, { cumulative: true }); // a smaller total never shrinks the count
      expect(rank0(t).active_decode_blocks).toBe(track ? 3 : 1);
    }
  });

  it('end() is idempotent and releases everything, also when called during prefill', () => {
    const t = new LoadTracker({ workerId: 1 });
    const a = t.callStarted(0, 100);
    const b = t.callStarted(0, 20);
    b.output(3);
    a.end();
    a.end();
    a.output(50);
    expect(rank0(t)).toMatchObject({ active_prefill_tokens: 0, active_decode_blocks: 2 });
    b.end();
    b.end();
    expect(rank0(t)).toMatchObject({ active_prefill_tokens: 0, active_decode_blocks: 0 });
  });

  it('keeps dp ranks apart and sends out-of-range ranks to rank 0', () => {
    const t = new LoadTracker({ workerId: 1, dataParallelSize: 2 });
    t.callStarted(1, 32);
    t.callStarted(5, 16);
    t.callStarted(-1, 16);
    const [r0, r1] = t.peek();
    expect(r0).toMatchObject({ dp_rank: 0, active_prefill_tokens: 32 });
    expect(r1).toMatchObject({ dp_rank: 1, active_prefill_tokens: 32, active_decode_blocks: 2 });
  });

  it('fires onChange on every change, and not for output that moves no block', () => {
    const t = new LoadTracker({ workerId: 1, kvBlockSize: 16, trackOutputBlocks: true });
    let n = 0;
    const off = t.onChange(() => n++);
    const c = t.callStarted(0, 10); // change 1
    c.output(1); // change 2: prefill ended (11 tokens, 1 block)
    c.output(1); // 12 tokens: still 1 block, no change
    c.output(5); // change 3: 17 tokens -> 2 blocks
    c.output(1); // 18 tokens: no change
    c.end(); // change 4
    off();
    t.markRejected();
    expect(n).toBe(4);
  });
});

describe('LoadTracker scrape and config precedence', () => {
  it('uses fresh scrape numbers, keeps total but drops used when stale, and falls back to flags', () => {
    const t = new LoadTracker({ workerId: 9, dataParallelSize: 2, kvTotalBlocks: 500, maxNumBatchedTokens: 8192, kvBlockSize: 16 });
    expect(t.peek()[0]).toMatchObject({ kv_used_blocks: null, kv_total_blocks: 500, max_num_batched_tokens: 8192 });
    t.applyScrape(new Map([[0, { kvUsedBlocks: 10, kvTotalBlocks: 1000, blockSize: 32 }]]), false);
    t.callStarted(0, 64);
    expect(t.peek()[0]).toMatchObject({ kv_used_blocks: 10, kv_total_blocks: 1000, active_decode_blocks: 2 });
    expect(t.peek()[1]).toMatchObject({ kv_used_blocks: null, kv_total_blocks: 500 }); // rank 1 absent from the scrape
    t.applyScrape(new Map([[0, { kvUsedBlocks: 10, kvTotalBlocks: 1000, blockSize: 32 }]]), true);
    expect(t.peek()[0]).toMatchObject({ kv_used_blocks: null, kv_total_blocks: 1000 });
  });

  it('emits exactly the wire field names, unknown optionals as null', () => {
    const t = new LoadTracker({ workerId: 42, now: () => 123 });
    expect(t.snapshot()).toEqual([
      {
        worker_id: 42,
        dp_rank: 0,
        active_decode_blocks: 0,
        active_prefill_tokens: 0,
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
        timestamp_ms: 123,
        sequence: 1,
        model: null,
        grpc_address: '',
        heartbeat_ms: 1000,
        predicted_ttft_ms: null,
        admit_now: null,
        request_queue_limit: null,
      },
    ]);
  });

  it('carries the predicted TTFT read when each event is taken, in whole ms, and null while unknown', () => {
    let predicted: number | undefined;
    const t = new LoadTracker({ workerId: 1, dataParallelSize: 2, predictTtftMs: () => predicted });
    expect(t.peek().map((e) => e.predicted_ttft_ms)).toEqual([null, null]);
    predicted = 123.6;
    expect(t.snapshot().map((e) => e.predicted_ttft_ms)).toEqual([124, 124]);
    predicted = 0;
    expect(t.peek()[0]!.predicted_ttft_ms).toBe(0);
  });

  it('carries the model, the advertised address and the heartbeat in every rank, and reports their changes', () => {
    const t = new LoadTracker({ workerId: 1, dataParallelSize: 2, heartbeatMs: 250, grpcAddress: '10.0.0.5:50050' });
    expect(t.peek().map(({ model, grpc_address, heartbeat_ms }) => ({ model, grpc_address, heartbeat_ms }))).toEqual([
      { model: null, grpc_address: '10.0.0.5:50050', heartbeat_ms: 250 },
      { model: null, grpc_address: '10.0.0.5:50050', heartbeat_ms: 250 },
    ]);
    let changes = 0;
    t.onChange(() => changes++);
    t.setModel('llama');
    t.setModel('llama'); // unchanged: no notification
    t.setGrpcAddress('10.0.0.5:7000');
    expect(changes).toBe(2);
    for (const e of t.peek()) expect(e).toMatchObject({ model: 'llama', grpc_address: '10.0.0.5:7000', heartbeat_ms: 250 });
    expect(new LoadTracker({ workerId: 1, model: 'from-flag' }).peek()[0]!.model).toBe('from-flag');
  });

  it('advances sequence per rank on every snapshot, never on peek', () => {
    const t = new LoadTracker({ workerId: 1, dataParallelSize: 2 });
    const seqs = [t.snapshot(), t.snapshot(), t.peek(), t.snapshot()].map((s) => s.map((e) => e.sequence));
    expect(seqs).toEqual([
      [1, 1],
      [2, 2],
      [2, 2],
      [3, 3],
    ]);
  });
});

describe('LoadTracker overloaded', () => {
  it('is true while the gate is full and false as soon as it has room', () => {
    const t = new LoadTracker({ workerId: 1 });
    t.setAdmission({ engineRequest: 4, requestQueue: 2, limit: 4, queueLimit: 2 });
    expect(t.overloaded).toBe(true);
    t.setAdmission({ engineRequest: 4, requestQueue: 1, limit: 4, queueLimit: 2 });
    expect(t.overloaded).toBe(false);
  });

  it('is set by a rejection and cleared when the load drains (no stale busy)', () => {
    const c = clock();
    const t = new LoadTracker({ workerId: 1, now: c.now, overloadHoldMs: 1000 });
    t.setAdmission({ engineRequest: 4, requestQueue: 2, limit: 4, queueLimit: 2 });
    t.markRejected();
    expect(rank0(t).overloaded).toBe(true);
    t.setAdmission({ engineRequest: 4, requestQueue: 1, limit: 4, queueLimit: 2 });
    expect(rank0(t).overloaded).toBe(false);
    t.setAdmission({ engineRequest: 0, requestQueue: 0, limit: 4, queueLimit: 2 });
    c.advance(60_000);
    expect(rank0(t).overloaded).toBe(false);
  });

  it('gives admit_now: free slots plus queue places, none while a refusal with places left holds; null with admission off', () => {
    const c = clock();
    const t = new LoadTracker({ workerId: 1, now: c.now, overloadHoldMs: 1000 });
    expect(rank0(t)).toMatchObject({ admit_now: null, request_queue_limit: null });
    t.setAdmission({ engineRequest: 2, requestQueue: 0, limit: 4, queueLimit: 3, hasRoom: true });
    expect(rank0(t)).toMatchObject({ admit_now: 5, request_queue_limit: 3, engine_request_limit: 4 });
    t.setAdmission({ engineRequest: 4, requestQueue: 1, limit: 4, queueLimit: 3, hasRoom: false });
    expect(rank0(t).admit_now).toBe(2);
    t.markRejected({ untilAdmittable: true });
    expect(rank0(t)).toMatchObject({ admit_now: 0, overloaded: true });
    // The hold ends by itself, and the queue places count again.
    c.advance(1000);
    expect(rank0(t)).toMatchObject({ admit_now: 2, overloaded: false });
  });

  it('holds a refusal made with queue places left until a call would be admitted at once', () => {
    const c = clock();
    const t = new LoadTracker({ workerId: 1, now: c.now, overloadHoldMs: 1000 });
    // Expected wait too long: the queue had places, so a place opening means nothing.
    t.setAdmission({ engineRequest: 4, requestQueue: 1, limit: 4, queueLimit: 4, hasRoom: false });
    t.markRejected({ untilAdmittable: true });
    t.setAdmission({ engineRequest: 4, requestQueue: 0, limit: 4, queueLimit: 4, hasRoom: false });
    expect(rank0(t).overloaded).toBe(true);
    // A slot free but the first-token limit full: still no call admitted at once.
    t.setAdmission({ engineRequest: 3, requestQueue: 0, limit: 4, queueLimit: 4, hasRoom: false });
    expect(rank0(t).overloaded).toBe(true);
    t.setAdmission({ engineRequest: 3, requestQueue: 0, limit: 4, queueLimit: 4, hasRoom: true });
    expect(rank0(t).overloaded).toBe(false);
    // ...and a later full-gate refusal goes back to the queue-place rule.
    t.setAdmission({ engineRequest: 4, requestQueue: 4, limit: 4, queueLimit: 4, hasRoom: false });
    t.markRejected();
    t.setAdmission({ engineRequest: 4, requestQueue: 3, limit: 4, queueLimit: 4, hasRoom: false });
    expect(rank0(t).overloaded).toBe(false);
  });

  it.each([
    { mark: 'a full-gate rejection', options: {} },
    { mark: 'a refusal held until admittable', options: { untilAdmittable: true } },
  ])('expires $mark by itself even if the proxy never reports room', ({ options }) => {
    const c = clock();
    const t = new LoadTracker({ workerId: 1, now: c.now, overloadHoldMs: 500 });
    t.markRejected(options);
    c.advance(499);
    expect(t.overloaded).toBe(true);
    c.advance(1);
    expect(t.snapshot()[0]!.overloaded).toBe(false);
  });

  it('says whom the refusals of the overload in progress refused: the most urgent priority, the tenants', () => {
    const c = clock();
    const t = new LoadTracker({ workerId: 1, now: c.now, overloadHoldMs: 1000 });
    t.setAdmission({ engineRequest: 4, requestQueue: 1, limit: 4, queueLimit: 4, hasRoom: false });
    t.markRejected({ untilAdmittable: true, callClass: { priority: 5, tenant: 'noisy' } });
    expect(rank0(t)).toMatchObject({ overloaded: true, overloaded_priority: 5, overloaded_tenants: ['noisy'] });
    t.markRejected({ untilAdmittable: true, callClass: { priority: 3, tenant: '' } });
    expect(rank0(t)).toMatchObject({ overloaded_priority: 3, overloaded_tenants: ['', 'noisy'] });
    for (let i = 0; i < 8; i++) t.markRejected({ untilAdmittable: true, callClass: { priority: 4, tenant: `t${i}` } });
    expect(rank0(t)).toMatchObject({ overloaded_priority: 3, overloaded_tenants: null }); // too many to list: everyone
    // A new overload starts afresh; one of unknown class is everyone's.
    c.advance(1000);
    expect(rank0(t)).toMatchObject({ overloaded: false, overloaded_priority: null, overloaded_tenants: null });
    t.markRejected({ untilAdmittable: true, callClass: { priority: 9, tenant: 'batch' } });
    expect(rank0(t)).toMatchObject({ overloaded_priority: 9, overloaded_tenants: ['batch'] });
    t.markRejected({ untilAdmittable: true });
    expect(rank0(t)).toMatchObject({ overloaded: true, overloaded_priority: null, overloaded_tenants: null });
  });

  it('while the gate is full, says whom the full queue refuses, joined with the recent refusals', () => {
    const c = clock();
    let scope: { priority: number; tenants: string[] | null } | undefined = { priority: 5, tenants: ['noisy'] };
    const t = new LoadTracker({ workerId: 1, now: c.now, overloadHoldMs: 1000, refusedWhenFull: () => scope });
    t.setAdmission({ engineRequest: 4, requestQueue: 2, limit: 4, queueLimit: 2 });
    expect(rank0(t)).toMatchObject({ overloaded: true, overloaded_priority: 5, overloaded_tenants: ['noisy'] });
    t.markRejected({ callClass: { priority: 2, tenant: 'other' } });
    expect(rank0(t)).toMatchObject({ overloaded_priority: 2, overloaded_tenants: ['noisy', 'other'] });
    scope = { priority: 5, tenants: null };
    expect(rank0(t)).toMatchObject({ overloaded_priority: 2, overloaded_tenants: null });
  });

  it('reports admission state and draining in every rank', () => {
    const t = new LoadTracker({ workerId: 1, dataParallelSize: 2 });
    t.setAdmission({ engineRequest: 3, requestQueue: 1, limit: 8, queueLimit: 16 });
    t.setDraining(true);
    for (const e of t.peek()) expect(e).toMatchObject({ engine_request: 3, request_queue: 1, engine_request_limit: 8, draining: true });
  });
});

describe('parseDpRankHeader', () => {
  it('accepts an integer in range and maps everything else to rank 0 with a flag', () => {
    expect(parseDpRankHeader('1', 2)).toEqual({ rank: 1, valid: true });
    expect(parseDpRankHeader([' 1 ', '0'], 2)).toEqual({ rank: 1, valid: true });
    expect(parseDpRankHeader(undefined, 2)).toEqual({ rank: 0, valid: true });
    for (const bad of ['2', '-1', '1.5', 'one', '', '0x1', '99999999999']) expect(parseDpRankHeader(bad, 2)).toEqual({ rank: 0, valid: false });
  });
});
