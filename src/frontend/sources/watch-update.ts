/**
 * A WorkerLoad.Watch update (proto/dynamo/sidecar/v1/worker_load.proto) decoded with at most
 * MAX_DP_RANKS ranks. One sidecar is one worker, which has no more ranks than that, so an update
 * naming more is broken or hostile; decoding all of it is what costs: 20,000 ranks took 60 to 270
 * ms of the event loop before a single one could be refused (issue 36). The ranks past the first
 * MAX_DP_RANKS are skipped undecoded (a tag and a length each) and counted instead.
 */
import protobuf from 'protobufjs/minimal.js';
import { MAX_DP_RANKS } from '../../protocol/load-event.js';

export interface WatchUpdate {
  /** The first MAX_DP_RANKS ranks, decoded as the proto loader does. */
  readonly ranks: readonly unknown[];
  /** Ranks past those, not decoded. */
  readonly ranksSkipped: number;
}

/** WorkerLoadUpdate.ranks: field 1, length-delimited. */
const RANKS_TAG = (1 << 3) | 2;

/**
 * Wraps the proto loader's WorkerLoadUpdate decoder so that it sees only the first `maxRanks`
 * ranks. Bytes it would refuse, it still refuses (the walk throws on the same truncations).
 */
export function boundedUpdateDecoder(decode: (bytes: Buffer) => { ranks?: unknown[] }, maxRanks = MAX_DP_RANKS): (bytes: Buffer) => WatchUpdate {
  return (bytes) => {
    const { kept, skipped } = withoutRanksPast(bytes, maxRanks);
    return { ranks: decode(kept).ranks ?? [], ranksSkipped: skipped };
  };
}

/** `bytes` without the rank entries past the first `maxRanks`: the same buffer when there are none. */
function withoutRanksPast(bytes: Buffer, maxRanks: number): { kept: Buffer; skipped: number } {
  const reader = protobuf.Reader.create(bytes);
  const runs: Buffer[] = [];
  let runStart = 0;
  let ranks = 0;
  let skipped = 0;
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const tag = reader.uint32();
    if (tag !== RANKS_TAG) {
      reader.skipType(tag & 7);
      continue;
    }
    reader.skip(reader.uint32());
    if (++ranks <= maxRanks) continue;
    skipped++;
    if (runStart < start) runs.push(bytes.subarray(runStart, start));
    runStart = reader.pos;
  }
  if (skipped === 0) return { kept: bytes, skipped };
  runs.push(bytes.subarray(runStart));
  return { kept: Buffer.concat(runs), skipped };
}
