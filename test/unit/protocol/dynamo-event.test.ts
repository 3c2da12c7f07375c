/**
 * Dynamo's event envelope as written by encodeDynamoEnvelope, read back with an independent
 * MessagePack decoder (msgpackr, not the library that wrote it) and, for the facts a lenient
 * decoder would hide (bin, not str or array; string keys; no float where Rust wants a u64), with
 * a few lines of byte reading that use no library at all.
 */
import { Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import {
  DYNAMO_LOAD_TOPIC,
  activeLoadOf,
  encodeDynamoEnvelope,
  randomPublisherId,
  type ActiveLoad,
  type DynamoEnvelopeHeader,
} from '../../../src/protocol/dynamo-event.js';
import type { LoadEvent } from '../../../src/protocol/load-event.js';

const ENVELOPE_KEYS = ['publisher_id', 'sequence', 'published_at', 'topic', 'payload', 'published_at_ns'];
const ACTIVE_LOAD_KEYS = ['worker_id', 'dp_rank', 'active_decode_blocks', 'active_prefill_tokens', 'kv_used_blocks'];
// Maps as plain objects, uint64 as bigint: what a strict reader of Dynamo's bytes would get.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
const decode = (bytes: Uint8Array): Record<string, unknown> => unpackr.unpack(bytes) as Record<string, unknown>;

const BIG_WORKER_ID = 2 ** 40 + 7;
const header: DynamoEnvelopeHeader = { publisherId: 2 ** 53 - 1, sequence: 41, publishedAtMs: 1_796_213_000_157, topic: DYNAMO_LOAD_TOPIC };
const load: ActiveLoad = { worker_id: BIG_WORKER_ID, dp_rank: 3, active_decode_blocks: 12, active_prefill_tokens: 70_000, kv_used_blocks: null };

/** An unsigned integer as msgpackr gives it: a number or, for uint 64, a bigint. */
function expectU64(value: unknown, expected: number | bigint): void {
  expect(['number', 'bigint']).toContain(typeof value);
  if (typeof value === 'number') expect(Number.isSafeInteger(value)).toBe(true);
  expect(BigInt(value as number | bigint)).toBe(BigInt(expected));
}

describe('encodeDynamoEnvelope, decoded independently', () => {
  it('writes an envelope map with exactly the envelope keys and their types', () => {
    const envelope = decode(encodeDynamoEnvelope(header, load));
    expect(Object.keys(envelope).sort()).toEqual([...ENVELOPE_KEYS].sort());
    expectU64(envelope['publisher_id'], 2 ** 53 - 1);
    expectU64(envelope['sequence'], 41);
    expectU64(envelope['published_at'], 1_796_213_000_157);
    expect(envelope['topic']).toBe('kv_metrics');
    expect(envelope['payload']).toBeInstanceOf(Uint8Array);
  });

  it('writes published_at_ns as the same instant in ns, an exact integer beyond 2^53', () => {
    const envelope = decode(encodeDynamoEnvelope(header, load));
    expect(typeof envelope['published_at_ns']).toBe('bigint');
    expect(envelope['published_at_ns']).toBe(1_796_213_000_157n * 1_000_000n);
  });

  it('carries an ActiveLoad map with exactly its five keys: a worker id above 2^32, a u32 rank, nil for a null count', () => {
    const payload = decode(decode(encodeDynamoEnvelope(header, load))['payload'] as Uint8Array);
    expect(Object.keys(payload).sort()).toEqual([...ACTIVE_LOAD_KEYS].sort());
    expectU64(payload['worker_id'], BIG_WORKER_ID);
    expect(payload['dp_rank']).toBe(3);
    expectU64(payload['active_decode_blocks'], 12);
    expectU64(payload['active_prefill_tokens'], 70_000);
    expect(payload['kv_used_blocks']).toBeNull();
  });

  it('writes a present kv_used_blocks as an integer, and zero counts as 0 (not nil)', () => {
    const payload = decode(
      decode(encodeDynamoEnvelope(header, { ...load, active_decode_blocks: 0, active_prefill_tokens: 0, kv_used_blocks: 2 ** 33 }))['payload'] as Uint8Array,
    );
    expect(payload).toMatchObject({ active_decode_blocks: 0, active_prefill_tokens: 0 });
    expectU64(payload['kv_used_blocks'], 2 ** 33);
  });

  it.each([
    ['a negative worker id', { ...load, worker_id: -1 }, header],
    ['a fractional count', { ...load, active_prefill_tokens: 1.5 }, header],
    ['an unsafe integer', { ...load, worker_id: 2 ** 60 }, header],
    ['a rank beyond u32', { ...load, dp_rank: 2 ** 32 }, header],
    ['a negative sequence', load, { ...header, sequence: -1 }],
  ] as const)('refuses %s (it could not be a Rust u64/u32)', (_what, badLoad, badHeader) => {
    expect(() => encodeDynamoEnvelope(badHeader, badLoad)).toThrow(RangeError);
  });
});

describe('encodeDynamoEnvelope, byte by byte', () => {
  it('writes both maps with string keys, the payload as bin, and no float anywhere', () => {
    const bytes = encodeDynamoEnvelope(header, load);
    const envelope = readMap(bytes);
    expect(envelope.map((e) => e.key)).toEqual(ENVELOPE_KEYS);
    for (const e of envelope) expect(isStr(e.keyByte), `key ${e.key}`).toBe(true);
    const payloadEntry = envelope.find((e) => e.key === 'payload')!;
    expect([0xc4, 0xc5, 0xc6]).toContain(payloadEntry.valueByte);
    expect(envelope.find((e) => e.key === 'published_at_ns')!.valueByte).toBe(0xcf); // uint 64

    const activeLoad = readMap(binContent(bytes, payloadEntry.valueAt));
    expect(activeLoad.map((e) => e.key)).toEqual(ACTIVE_LOAD_KEYS);
    for (const e of activeLoad) expect(isStr(e.keyByte), `key ${e.key}`).toBe(true);
    expect(activeLoad.find((e) => e.key === 'worker_id')!.valueByte).toBe(0xcf); // uint 64, not float 64 (0xcb)
    expect(activeLoad.find((e) => e.key === 'kv_used_blocks')!.valueByte).toBe(0xc0); // nil
    for (const e of [...envelope, ...activeLoad]) expect([0xca, 0xcb], `value of ${e.key}`).not.toContain(e.valueByte);
  });
});

describe('activeLoadOf and randomPublisherId', () => {
  it("takes exactly ActiveLoad's fields from our event, rounding a fractional scraped count and keeping null", () => {
    const event = {
      worker_id: 9,
      dp_rank: 1,
      active_decode_blocks: 4,
      active_prefill_tokens: 100,
      kv_used_blocks: 39.6,
      kv_total_blocks: 64,
      overloaded: true,
      draining: false,
    } as unknown as LoadEvent;
    expect(activeLoadOf(event)).toEqual({ worker_id: 9, dp_rank: 1, active_decode_blocks: 4, active_prefill_tokens: 100, kv_used_blocks: 40 });
    expect(activeLoadOf({ ...event, kv_used_blocks: null }).kv_used_blocks).toBeNull();
  });

  it('draws publisher ids that are safe integers (masked to 53 bits) and differ between publishers', () => {
    const ids = Array.from({ length: 20 }, () => randomPublisherId());
    for (const id of ids) {
      expect(Number.isSafeInteger(id)).toBe(true);
      expect(id).toBeGreaterThanOrEqual(0);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });
});

// --- a minimal MessagePack reader: just the formats these two maps may contain ---------------

interface Entry {
  readonly key: string;
  readonly keyByte: number;
  readonly valueByte: number;
  readonly valueAt: number;
}

const isStr = (b: number): boolean => (b >= 0xa0 && b <= 0xbf) || b === 0xd9 || b === 0xda || b === 0xdb;

function byteAt(bytes: Uint8Array, at: number): number {
  const b = bytes[at];
  if (b === undefined) throw new Error(`truncated at ${at}`);
  return b;
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Where the value at `at` ends. */
function skip(bytes: Uint8Array, at: number): number {
  const b = byteAt(bytes, at);
  const v = view(bytes);
  if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) return at + 1;
  if (b >= 0xa0 && b <= 0xbf) return at + 1 + (b - 0xa0);
  if (b >= 0x80 && b <= 0x8f) {
    let pos = at + 1;
    for (let i = 0; i < 2 * (b - 0x80); i++) pos = skip(bytes, pos);
    return pos;
  }
  const fixed: Record<number, number> = { 0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xca: 4, 0xcb: 8 };
  if (fixed[b] !== undefined) return at + 1 + fixed[b];
  if (b === 0xc4 || b === 0xd9) return at + 2 + v.getUint8(at + 1);
  if (b === 0xc5 || b === 0xda) return at + 3 + v.getUint16(at + 1);
  if (b === 0xc6 || b === 0xdb) return at + 5 + v.getUint32(at + 1);
  throw new Error(`unexpected type byte 0x${b.toString(16)} at ${at}`);
}

/** A fixmap's entries in order (both maps here have fewer than 16). */
function readMap(bytes: Uint8Array): Entry[] {
  const head = byteAt(bytes, 0);
  expect(head & 0xf0, 'a fixmap').toBe(0x80);
  const entries: Entry[] = [];
  let pos = 1;
  for (let i = 0; i < (head & 0x0f); i++) {
    const keyByte = byteAt(bytes, pos);
    const keyEnd = skip(bytes, pos);
    const keyStart = keyByte >= 0xa0 && keyByte <= 0xbf ? pos + 1 : pos + 2;
    const key = Buffer.from(bytes.subarray(keyStart, keyEnd)).toString('utf8');
    entries.push({ key, keyByte, valueByte: byteAt(bytes, keyEnd), valueAt: keyEnd });
    pos = skip(bytes, keyEnd);
  }
  expect(pos, 'nothing after the map').toBe(bytes.length);
  return entries;
}

function binContent(bytes: Uint8Array, at: number): Uint8Array {
  const b = byteAt(bytes, at);
  const header = b === 0xc4 ? 2 : b === 0xc5 ? 3 : 5;
  return bytes.subarray(at + header, skip(bytes, at));
}
