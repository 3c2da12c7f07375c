/**
 * Incremental splitter for gRPC length-prefixed messages (5-byte prefix: compressed flag,
 * big-endian uint32 length), fed with DATA chunks as they arrive.
 *
 *   const frames = new GrpcFrameReader({ maxMessageBytes: 1 << 20 });
 *   for (const f of frames.push(chunk)) if (f.kind === 'message') decode(f.payload);
 *
 * Cost model: it only observes a stream the proxy forwards anyway, so it must not hold big
 * messages. A message that fits in one chunk is returned as a view (no copy); one split across
 * chunks is copied into a buffer of exactly its size. Messages over `maxMessageBytes` and
 * compressed ones are skipped as their bytes pass, never buffered, and reported as
 * 'oversized' / 'compressed'. A flag byte other than 0/1 means the stream is not gRPC framing
 * as we understand it: the reader reports 'invalid' once and ignores the rest of the stream.
 * Never throws.
 */

export type GrpcFrame =
  { kind: 'message'; payload: Uint8Array } | { kind: 'compressed'; length: number } | { kind: 'oversized'; length: number } | { kind: 'invalid'; flag: number };

export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

export class GrpcFrameReader {
  readonly stats = { messages: 0, compressed: 0, oversized: 0, invalid: 0 };
  private readonly maxMessageBytes: number;
  private readonly header = new Uint8Array(5);
  private headerFill = 0;
  /** Bytes of the current body still to come; -1 while reading a header. */
  private remaining = -1;
  private body: Uint8Array | undefined;
  private bodyFill = 0;
  private skipping: GrpcFrame | undefined;
  private broken = false;

  constructor(options: { maxMessageBytes?: number } = {}) {
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  push(chunk: Uint8Array): GrpcFrame[] {
    const out: GrpcFrame[] = [];
    let pos = 0;
    while (pos < chunk.length && !this.broken) {
      if (this.remaining < 0) {
        const take = Math.min(5 - this.headerFill, chunk.length - pos);
        this.header.set(chunk.subarray(pos, pos + take), this.headerFill);
        this.headerFill += take;
        pos += take;
        if (this.headerFill === 5) this.startBody(out);
        // A zero-length message completes with its header.
        if (this.remaining === 0) this.finishBody(out, new Uint8Array(0));
        continue;
      }
      const take = Math.min(this.remaining, chunk.length - pos);
      if (this.skipping === undefined) {
        if (this.body === undefined && take === this.remaining) {
          this.finishBody(out, chunk.subarray(pos, pos + take));
          pos += take;
          continue;
        }
        this.body ??= new Uint8Array(this.remaining);
        this.body.set(chunk.subarray(pos, pos + take), this.bodyFill);
        this.bodyFill += take;
      }
      this.remaining -= take;
      pos += take;
      if (this.remaining === 0) this.finishBody(out, this.body ?? new Uint8Array(0));
    }
    return out;
  }

  private startBody(out: GrpcFrame[]): void {
    const flag = this.header[0]!;
    const length = new DataView(this.header.buffer).getUint32(1);
    this.headerFill = 0;
    if (flag > 1) {
      this.broken = true;
      this.stats.invalid++;
      out.push({ kind: 'invalid', flag });
      return;
    }
    this.remaining = length;
    if (flag === 1) this.skipping = { kind: 'compressed', length };
    else if (length > this.maxMessageBytes) this.skipping = { kind: 'oversized', length };
  }

  private finishBody(out: GrpcFrame[], payload: Uint8Array): void {
    if (this.skipping) {
      this.stats[this.skipping.kind === 'compressed' ? 'compressed' : 'oversized']++;
      out.push(this.skipping);
    } else {
      this.stats.messages++;
      out.push({ kind: 'message', payload });
    }
    this.remaining = -1;
    this.body = undefined;
    this.bodyFill = 0;
    this.skipping = undefined;
  }
}
