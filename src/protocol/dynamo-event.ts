/**
 * NVIDIA Dynamo's event plane, as a Dynamo frontend started with DYN_EVENT_PLANE=nats reads it
 * (docs/wire-facts.md, "Dynamo"): the load event is Dynamo's `ActiveLoad`, MessagePack-encoded
 * with named fields (a map with string keys, rmp_serde's `to_vec_named`), carried as MessagePack
 * bin in an `EventEnvelope`, itself a named-field MessagePack map:
 *
 *   { publisher_id: u64, sequence: u64, published_at: u64 (Unix ms), topic: "kv_metrics",
 *     payload: bin(msgpack ActiveLoad), published_at_ns: u64 (Unix ns) }
 *   ActiveLoad { worker_id: u64, dp_rank: u32, active_decode_blocks: u64?, active_prefill_tokens: u64?,
 *                kv_used_blocks: u64? }   (None is nil)
 *
 * `published_at_ns` is only in newer Dynamo envelopes. Serde ignores map keys a struct does not
 * name, so writing it as well lets both older consumers (five fields) and newer ones (six)
 * decode the same bytes. Its value is `published_at` times 10^6: the same instant at millisecond
 * resolution, never a second clock that could disagree with the first.
 *
 * A wire fact shared by the sidecar (which publishes it with --event-format dynamo) and any reader.
 */
import { randomBytes } from 'node:crypto';
import { Encoder } from '@msgpack/msgpack';
import type { LoadEvent } from './load-event.js';

/** How load events are written to NATS: our JSON event, or Dynamo's envelope around ActiveLoad. */
export const EVENT_FORMATS = ['json', 'dynamo'] as const;
export type EventFormat = (typeof EVENT_FORMATS)[number];

/** The envelope's topic for load events (the last segment of the subject they travel on). */
export const DYNAMO_LOAD_TOPIC = 'kv_metrics';

/** Dynamo's ActiveLoad (lib/kv-router/src/protocols.rs); the names are the map keys on the wire. */
export interface ActiveLoad {
  readonly worker_id: number;
  readonly dp_rank: number;
  readonly active_decode_blocks: number | null;
  readonly active_prefill_tokens: number | null;
  readonly kv_used_blocks: number | null;
}

/** What the envelope says besides its payload. */
export interface DynamoEnvelopeHeader {
  /** Random per publisher, below 2^53 (see randomPublisherId). */
  readonly publisherId: number;
  /** Per publisher: 0 for its first envelope, +1 for each after. */
  readonly sequence: number;
  /** Unix time in ms. */
  readonly publishedAtMs: number;
  readonly topic: string;
}

/**
 * Dynamo draws a random u64 per publisher and masks it to 53 bits (MAX_JSON_SAFE_PUBLISHER_ID),
 * so the id also survives JSON and float64; we do the same.
 */
export function randomPublisherId(): number {
  return Number(randomBytes(8).readBigUInt64BE(0) & (2n ** 53n - 1n));
}

/** The ActiveLoad part of our event. Counts are integers on the wire: a fractional scraped count is rounded. */
export function activeLoadOf(event: LoadEvent): ActiveLoad {
  return {
    worker_id: event.worker_id,
    dp_rank: event.dp_rank,
    active_decode_blocks: count(event.active_decode_blocks),
    active_prefill_tokens: count(event.active_prefill_tokens),
    kv_used_blocks: count(event.kv_used_blocks),
  };
}

function count(value: number | null): number | null {
  return value === null ? null : Math.max(0, Math.round(value));
}

// useBigInt64 so that published_at_ns (above 2^53) can be written as a bigint. With it set, this
// library writes a *number* of 2^32 or more as float64, which a Rust u64 refuses: every u64 field
// goes through u64() below, which hands over such values as bigints (always uint 64 then).
const encoder = new Encoder({ useBigInt64: true });

/** The bytes of one envelope carrying `load`; throws RangeError on a value that is not a valid u64/u32. */
export function encodeDynamoEnvelope(header: DynamoEnvelopeHeader, load: ActiveLoad): Uint8Array {
  const payload = encoder.encode({
    worker_id: u64(load.worker_id, 'worker_id'),
    dp_rank: u32(load.dp_rank, 'dp_rank'),
    active_decode_blocks: optionalU64(load.active_decode_blocks, 'active_decode_blocks'),
    active_prefill_tokens: optionalU64(load.active_prefill_tokens, 'active_prefill_tokens'),
    kv_used_blocks: optionalU64(load.kv_used_blocks, 'kv_used_blocks'),
  });
  return encoder.encode({
    publisher_id: u64(header.publisherId, 'publisher_id'),
    sequence: u64(header.sequence, 'sequence'),
    published_at: u64(header.publishedAtMs, 'published_at'),
    topic: header.topic,
    // A Uint8Array is written as MessagePack bin, as serde's serialize_bytes is.
    payload,
    published_at_ns: BigInt(u64(header.publishedAtMs, 'published_at')) * 1_000_000n,
  });
}

/** Below 2^32 a number (smallest integer encoding), above a bigint (uint 64): never a float. */
function u64(value: number, field: string): number | bigint {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${field} must be an integer in 0..2^53-1, got ${value}`);
  return value < 2 ** 32 ? value : BigInt(value);
}

function u32(value: number, field: string): number {
  if (!Number.isSafeInteger(value) || value < 0 || value >= 2 ** 32) throw new RangeError(`${field} must be an integer in 0..2^32-1, got ${value}`);
  return value;
}

function optionalU64(value: number | null, field: string): number | bigint | null {
  return value === null ? null : u64(value, field);
}
