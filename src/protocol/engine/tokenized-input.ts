/**
 * The `tokenized` field of a Generate request written straight to bytes, as the frontend sends
 * it: field 2 (TokenizedInput) holding only `input_ids` (2, packed uint32). The numbers are the
 * same in vLLM's and SGLang's layouts (docs/wire-facts.md). `original_text` (1) is left out: both
 * servicers use the ids, vLLM's keeps the text only as the prompt it echoes in its outputs, so
 * sending it would double the message for nothing.
 *
 * Writing the bytes here, rather than handing protobufjs an array, is what bounds a request's
 * memory: protobufjs copies the array (fromObject) and allocates one writer operation per id
 * (about 48 bytes each, against the 1-3 bytes of the id on the wire). The writer stops at a byte
 * budget, so a prompt too large for its message costs at most the budget, never its own size.
 *
 *   const writer = new TokenizedInputWriter(maxBytes, capacityHint);
 *   for (const id of ids) if (!writer.push(id)) break;     // false: over maxBytes
 *   writer.overflowed ? refuse() : send(writer.finish());
 */

/** Room for both tags and both lengths in front of the ids (each length a varint of at most 5 bytes). */
const HEADER_BYTES = 12;
/** Tag of field 2 with wire type 2 (length-delimited): `tokenized` in GenerateRequest, `input_ids` in TokenizedInput. */
const FIELD_2_LEN = 0x12;

function varintSize(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5;
}

export class TokenizedInputWriter {
  private buffer: Uint8Array;
  private pos = HEADER_BYTES;
  private count = 0;
  private over = false;

  /**
   * `maxBytes`: the most the whole field may take; `capacityHint`: the bytes to allocate at first
   * (the buffer doubles when it fills, never past the budget).
   */
  constructor(
    private readonly maxBytes: number,
    capacityHint: number,
  ) {
    // pos never passes maxBytes, so maxBytes + 5 (one varint more) is the most the buffer needs.
    this.buffer = new Uint8Array(Math.max(HEADER_BYTES + 16, Math.min(HEADER_BYTES + capacityHint, maxBytes + 5)));
  }

  /** Ids written so far. */
  get tokens(): number {
    return this.count;
  }

  /** The field went over its budget: nothing more is written and `finish()` throws. */
  get overflowed(): boolean {
    return this.over;
  }

  /** Appends one id (a uint32); false when it does not fit the budget. */
  push(id: number): boolean {
    if (this.over) return false;
    const value = id >>> 0;
    if (this.pos + varintSize(value) > this.maxBytes) {
      this.over = true;
      return false;
    }
    if (this.pos + 5 > this.buffer.length) this.grow();
    this.pos = writeVarint(this.buffer, this.pos, value);
    this.count++;
    return true;
  }

  /** The field's bytes (tag, length, TokenizedInput), a view of the writer's buffer. */
  finish(): Uint8Array {
    if (this.over) throw new Error('the tokenized field went over its budget');
    const ids = this.pos - HEADER_BYTES;
    const inner = 1 + varintSize(ids) + ids;
    const start = HEADER_BYTES - (1 + varintSize(inner) + 1 + varintSize(ids));
    let at = start;
    this.buffer[at++] = FIELD_2_LEN;
    at = writeVarint(this.buffer, at, inner);
    this.buffer[at++] = FIELD_2_LEN;
    writeVarint(this.buffer, at, ids);
    return this.buffer.subarray(start, this.pos);
  }

  private grow(): void {
    const next = new Uint8Array(Math.min(this.buffer.length * 2, this.maxBytes + 5));
    next.set(this.buffer.subarray(0, this.pos));
    this.buffer = next;
  }
}

function writeVarint(buffer: Uint8Array, at: number, value: number): number {
  let v = value;
  while (v >= 0x80) {
    buffer[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buffer[at++] = v;
  return at;
}

/** The field for ids already in hand (a completions prompt given as ids), or undefined when over `maxBytes`. */
export function encodeTokenizedInput(ids: ArrayLike<number>, maxBytes: number): Uint8Array | undefined {
  const writer = new TokenizedInputWriter(maxBytes, ids.length * 2);
  for (let i = 0; i < ids.length; i++) if (!writer.push(ids[i]!)) return undefined;
  return writer.finish();
}
