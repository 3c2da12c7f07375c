import { describe, expect, it } from 'vitest';
import type { BoundedFact } from '../../../../src/protocol/engine/engine-facts.js';
import { LearnedValueCheck, withinBounds } from '../../../../src/sidecar/load/learned-bounds.js';
import { recordingLogger } from '../../../support/recording-logger.js';

const HOSTILE = [0, -1, 1.5, NaN, Infinity, -Infinity, 2 ** 53, 2 ** 63];

describe('withinBounds', () => {
  it.each<[BoundedFact, number, number]>([
    ['dataParallelSize', 1, 1024],
    ['kvBlockSize', 1, 2 ** 20],
    ['kvTotalBlocks', 1, Number.MAX_SAFE_INTEGER],
    ['maxNumBatchedTokens', 1, Number.MAX_SAFE_INTEGER],
    ['maxRunningRequests', 1, Number.MAX_SAFE_INTEGER],
  ])('%s: integers in %i..%i, as its flag takes', (fact, min, max) => {
    expect(withinBounds(fact, min)).toBe(true);
    expect(withinBounds(fact, max)).toBe(true);
    expect(withinBounds(fact, max + 1)).toBe(false);
    for (const value of HOSTILE) expect(withinBounds(fact, value), String(value)).toBe(false);
  });

  it('holds a dp size of 2^31-1 and a block size of 2^31-1 out, which a block count may be', () => {
    expect(withinBounds('dataParallelSize', 2 ** 31 - 1)).toBe(false);
    expect(withinBounds('kvBlockSize', 2 ** 31 - 1)).toBe(false);
    expect(withinBounds('kvTotalBlocks', 2 ** 31 - 1)).toBe(true);
  });
});

describe('LearnedValueCheck', () => {
  it('passes a value in range through silently', () => {
    const log = recordingLogger();
    expect(new LearnedValueCheck(log).accept('dataParallelSize', 'dp_rank_count', 8)).toBe(8);
    expect(log.lines).toEqual([]);
  });

  it("refuses a value out of range with one warning naming the engine's field and the flag, however often the field says it", () => {
    const log = recordingLogger();
    const check = new LearnedValueCheck(log);
    for (const value of [2 ** 31 - 1, -1, NaN, 2 ** 31 - 1]) expect(check.accept('dataParallelSize', 'dp_rank_count', value)).toBeUndefined();
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]).toMatchObject({ level: 'warn', fields: { engine_field: 'dp_rank_count', value: '2147483647', min: 1, max: 1024 } });
    expect(log.lines[0]!.msg).toContain('--data-parallel-size');
  });

  it('warns once per field: another field out of range has its own warning', () => {
    const log = recordingLogger();
    const check = new LearnedValueCheck(log);
    check.accept('kvBlockSize', 'page_size', 2 ** 21);
    check.accept('kvBlockSize', 'page_size', 2 ** 22);
    check.accept('maxRunningRequests', 'max_running_requests', 2 ** 63);
    expect(log.lines.map((line) => line.fields['engine_field'])).toEqual(['page_size', 'max_running_requests']);
    expect(log.lines[1]!.msg).toContain('--engine-request-limit');
  });
});
