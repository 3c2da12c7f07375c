// One rank's load event, from NATS or the push stream: tolerant of missing numbers, strict on values that would misroute.
import { describe, expect, it } from 'vitest';
import { InvalidLoadReportError, MAX_PREDICTED_TTFT_MS, parseRankReport } from '../../../../src/frontend/routing/load-report.js';

function refusal(value: unknown): string {
  try {
    parseRankReport(value);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLoadReportError);
    expect((error as Error).name).toBe('InvalidLoadReportError');
    return (error as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

describe('parseRankReport', () => {
  it('reads every field of a full event', () => {
    expect(
      parseRankReport({
        worker_id: 7,
        dp_rank: 2,
        active_decode_blocks: 3,
        active_prefill_tokens: 40,
        kv_used_blocks: 5,
        kv_total_blocks: 100,
        max_num_batched_tokens: 2048,
        overloaded: true,
        draining: true,
        model: 'm',
        grpc_address: '10.0.0.1:9000',
        heartbeat_ms: 1000,
        engine_request: 4,
        request_queue: 1,
        predicted_ttft_ms: 180,
        overloaded_priority: 3,
        overloaded_tenants: ['noisy', ''],
      }),
    ).toEqual({
      workerId: '7',
      dpRank: 2,
      activeDecodeBlocks: 3,
      activePrefillTokens: 40,
      kvUsedBlocks: 5,
      kvTotalBlocks: 100,
      maxNumBatchedTokens: 2048,
      overloaded: true,
      draining: true,
      model: 'm',
      grpcAddress: '10.0.0.1:9000',
      heartbeatMs: 1000,
      engineRequest: 4,
      requestQueue: 1,
      predictedTtftMs: 180,
      overloadScope: { priority: 3, tenants: new Set(['noisy', '']) },
    });
  });

  it("reads an overload it cannot scope (absent, or not understood) as everyone's", () => {
    expect(parseRankReport({ worker_id: 1, overloaded: true }).overloadScope).toBeUndefined();
    expect(parseRankReport({ worker_id: 1, overloaded: true, overloaded_priority: 'x', overloaded_tenants: [1] }).overloadScope).toBeUndefined();
    expect(parseRankReport({ worker_id: 1, overloaded: true, overloaded_priority: 2.5, overloaded_tenants: ['a'] }).overloadScope).toEqual({
      priority: -Infinity,
      tenants: new Set(['a']),
    });
    expect(parseRankReport({ worker_id: 1, overloaded: true, overloaded_priority: 4, overloaded_tenants: [] }).overloadScope).toEqual({
      priority: 4,
      tenants: null,
    });
    expect(parseRankReport({ worker_id: 1, overloaded: false, overloaded_priority: 4 }).overloadScope).toBeUndefined();
  });

  it("takes Dynamo's ActiveLoad with only worker_id: rank 0, every count unknown, flags false", () => {
    expect(parseRankReport({ worker_id: 1 })).toEqual({
      workerId: '1',
      dpRank: 0,
      activeDecodeBlocks: undefined,
      activePrefillTokens: undefined,
      kvUsedBlocks: undefined,
      kvTotalBlocks: undefined,
      maxNumBatchedTokens: undefined,
      overloaded: false,
      overloadScope: undefined,
      draining: false,
      model: undefined,
      grpcAddress: undefined,
      heartbeatMs: undefined,
      engineRequest: undefined,
      requestQueue: undefined,
      predictedTtftMs: undefined,
    });
  });

  it('reads null counts and empty strings as absent, and only true as a set flag', () => {
    const report = parseRankReport({ worker_id: 1, kv_used_blocks: null, model: '', grpc_address: null, overloaded: 'true', draining: 1 });
    expect(report).toMatchObject({ kvUsedBlocks: undefined, model: undefined, grpcAddress: undefined, overloaded: false, draining: false });
  });

  it('keeps u64 worker ids beyond 2^53 exact, from a decimal string or a bigint, without leading zeros', () => {
    expect(parseRankReport({ worker_id: '18446744073709551615' }).workerId).toBe('18446744073709551615');
    expect(parseRankReport({ worker_id: 9007199254740993n }).workerId).toBe('9007199254740993');
    expect(parseRankReport({ worker_id: '007' }).workerId).toBe('7');
  });

  it.each([[undefined], [-1], [1.5], [2 ** 53], ['18446744073709551616'], ['-1'], ['0x10'], [''], [-1n], [2n ** 64n], [{}]])(
    'refuses worker_id %s',
    (workerId) => {
      expect(refusal({ worker_id: workerId })).toMatch(/^worker_id must be an unsigned 64-bit integer, got /);
    },
  );

  it('names a bigint worker_id it refuses in decimal (JSON cannot write a bigint)', () => {
    expect(refusal({ worker_id: 2n ** 64n })).toBe('worker_id must be an unsigned 64-bit integer, got "18446744073709551616"');
  });

  it.each([
    ['an array', [{ worker_id: 1 }]],
    ['null', null],
    ['a string', '{"worker_id":1}'],
  ])('refuses %s as not an object', (_, value) => {
    expect(refusal(value)).toBe('a load event must be a JSON object');
  });

  it('reads counts written as decimal strings (u64 fields over the push stream)', () => {
    expect(parseRankReport({ worker_id: 1, kv_total_blocks: '4096', dp_rank: '3' })).toMatchObject({ kvTotalBlocks: 4096, dpRank: 3 });
  });

  it.each(['active_decode_blocks', 'active_prefill_tokens', 'kv_used_blocks', 'kv_total_blocks', 'max_num_batched_tokens', 'engine_request', 'request_queue'])(
    'refuses a negative, non-finite or non-numeric %s, naming it',
    (field) => {
      for (const bad of [-1, Infinity, '1.5', '-2', true]) {
        expect(refusal({ worker_id: 1, [field]: bad })).toBe(`${field} must be a number >= 0, got ${JSON.stringify(bad)}`);
      }
    },
  );

  it('keeps dp_rank within 0..65535 and whole', () => {
    expect(parseRankReport({ worker_id: 1, dp_rank: 65535 }).dpRank).toBe(65535);
    expect(refusal({ worker_id: 1, dp_rank: 65536 })).toBe('dp_rank must be an integer in 0..65535, got 65536');
    expect(refusal({ worker_id: 1, dp_rank: 0.5 })).toBe('dp_rank must be an integer in 0..65535, got 0.5');
  });

  it('takes host:port addresses, IPv6 in brackets, and refuses anything else', () => {
    for (const good of ['sidecar-0.ns.svc:50051', '[::1]:1', '127.0.0.1:65535'])
      expect(parseRankReport({ worker_id: 1, grpc_address: good }).grpcAddress).toBe(good);
    for (const bad of ['host', 'host:0', 'host:65536', '::1:80', 'http://h:1', 'a b:1', 'h:123456']) {
      expect(refusal({ worker_id: 1, grpc_address: bad })).toBe(`grpc_address must be host:port, got ${JSON.stringify(bad)}`);
    }
    expect(refusal({ worker_id: 1, grpc_address: 9000 })).toBe('grpc_address must be a string, got 9000');
  });

  it('takes heartbeat_ms in the sidecar range, reads 0 as unknown, and refuses the rest', () => {
    expect(parseRankReport({ worker_id: 1, heartbeat_ms: 0 }).heartbeatMs).toBeUndefined();
    expect(parseRankReport({ worker_id: 1, heartbeat_ms: 10 }).heartbeatMs).toBe(10);
    expect(parseRankReport({ worker_id: 1, heartbeat_ms: 3_600_000 }).heartbeatMs).toBe(3_600_000);
    for (const bad of [9, 3_600_001, 1e15])
      expect(refusal({ worker_id: 1, heartbeat_ms: bad })).toContain('heartbeat_ms must be 0 (unknown) or in 10..3600000');
  });

  it.each([
    ['0 (admitted at once, a fast first token)', 0, 0],
    ['a whole number', 180, 180],
    ['a fraction (JSON may carry one)', 12.5, 12.5],
    ['a decimal string', '250', 250],
    ['the largest believed value', MAX_PREDICTED_TTFT_MS, MAX_PREDICTED_TTFT_MS],
    ['null (not known yet)', null, undefined],
    ['absent', undefined, undefined],
    ['negative', -1, undefined],
    ['NaN', NaN, undefined],
    ['Infinity', Infinity, undefined],
    ['absurd (past an hour)', MAX_PREDICTED_TTFT_MS + 1, undefined],
    ['uint32 max', 2 ** 32 - 1, undefined],
    ['a negative string', '-5', undefined],
    ['a non-numeric string', 'fast', undefined],
    ['a boolean', true, undefined],
    ['an object', { ms: 5 }, undefined],
    ['an array', [5], undefined],
  ])('predicted_ttft_ms %s reads as %s, and never refuses the event', (_, value, expected) => {
    const report = parseRankReport({ worker_id: 1, active_prefill_tokens: 7, predicted_ttft_ms: value });
    expect(report.predictedTtftMs).toBe(expected);
    // The rest of the event is still read: a bad estimate does not hide the load.
    expect(report.activePrefillTokens).toBe(7);
  });

  it('refuses a model that is not a string', () => {
    expect(refusal({ worker_id: 1, model: 5 })).toBe('model must be a string, got 5');
  });
});
