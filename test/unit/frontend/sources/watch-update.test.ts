// A Watch update decoded with at most MAX_DP_RANKS ranks: the rest are skipped undecoded and counted.
import * as protoLoader from '@grpc/proto-loader';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_DP_RANKS } from '../../../../src/protocol/load-event.js';
import { PROTO_DIR } from '../../../../src/protocol/proto-path.js';
import { workerLoadClientCtor } from '../../../../src/frontend/sources/push-source.js';
import { boundedUpdateDecoder } from '../../../../src/frontend/sources/watch-update.js';
import { bytes, num } from '../../../support/proto-bytes.js';

/** The proto loader's own WorkerLoadUpdate codec, with the options the push source loads it with. */
const watch = protoLoader.loadSync(join(PROTO_DIR, 'dynamo/sidecar/v1/worker_load.proto'), { keepCase: true, longs: String, defaults: true, oneofs: true })[
  'dynamo.sidecar.v1.WorkerLoad'
] as protoLoader.ServiceDefinition;
const encode = (ranks: object[]): Buffer => watch['Watch']!.responseSerialize({ ranks });
const decode = (wire: Buffer) => watch['Watch']!.responseDeserialize(wire) as { ranks?: unknown[] };

const ranks = (count: number) => Array.from({ length: count }, (_, i) => ({ worker_id: 77, dp_rank: i, model: 'm' }));
const dpRanks = (decoded: readonly unknown[]) => decoded.map((rank) => (rank as { dp_rank: number }).dp_rank);

describe('boundedUpdateDecoder', () => {
  it('decodes an update of at most the cap whole, as the proto loader does, from the very bytes', () => {
    const wire = encode(ranks(MAX_DP_RANKS));
    const seen: Buffer[] = [];
    const update = boundedUpdateDecoder((b) => (seen.push(b), decode(b)))(wire);
    expect(update.ranksSkipped).toBe(0);
    expect(update.ranks).toEqual(decode(wire).ranks);
    expect(seen[0]).toBe(wire);
  });

  it('keeps the first ranks up to the cap and counts the rest skipped, keeping fields it does not know wherever they are', () => {
    const unknown = num(9, 5);
    const rank = (i: number) => bytes(1, [...num(1, 77), ...num(2, i)]);
    const wire = Buffer.from([...rank(0), ...unknown, ...rank(1), ...rank(2), ...unknown, ...rank(3), ...rank(4), ...unknown]);
    const seen: Buffer[] = [];
    const update = boundedUpdateDecoder((b) => (seen.push(b), decode(b)), 2)(wire);
    expect(update.ranksSkipped).toBe(3);
    expect(dpRanks(update.ranks)).toEqual([0, 1]);
    expect([...seen[0]!]).toEqual([...rank(0), ...unknown, ...rank(1), ...unknown, ...unknown]);
  });

  it('is the push client decoder: 20,000 ranks decode to the first 1,024', () => {
    const update = workerLoadClientCtor().service['Watch']!.responseDeserialize(encode(ranks(20_000))) as ReturnType<ReturnType<typeof boundedUpdateDecoder>>;
    expect(update.ranksSkipped).toBe(20_000 - MAX_DP_RANKS);
    expect(dpRanks(update.ranks)).toEqual(dpRanks(ranks(MAX_DP_RANKS)));
    expect(update.ranks[1]).toMatchObject({ worker_id: '77', dp_rank: 1, model: 'm' });
  });

  it('refuses a truncated update, as the proto loader would, whether the cut is in a kept rank or a skipped one', () => {
    const wire = encode(ranks(4));
    for (const maxRanks of [MAX_DP_RANKS, 1]) expect(() => boundedUpdateDecoder(decode, maxRanks)(wire.subarray(0, wire.length - 2))).toThrow();
  });
});
