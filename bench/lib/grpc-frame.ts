/** gRPC length-prefixed message framing (5-byte prefix: flag 0, big-endian uint32 length). */

export function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/**
 * Splits a byte stream into gRPC messages as chunks arrive; a message may span chunks and a
 * chunk may hold many messages.
 */
export class FrameReader {
  private pending: Buffer | undefined;

  constructor(private readonly onMessage: (message: Buffer) => void) {}

  push(chunk: Buffer): void {
    const buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    let offset = 0;
    while (buf.length - offset >= 5) {
      const length = buf.readUInt32BE(offset + 1);
      if (buf.length - offset - 5 < length) break;
      this.onMessage(buf.subarray(offset + 5, offset + 5 + length));
      offset += 5 + length;
    }
    this.pending = offset < buf.length ? buf.subarray(offset) : undefined;
    if (this.pending && offset > 0) this.pending = Buffer.from(this.pending);
  }
}

/** Engine-side timestamp in a token message: CLOCK_MONOTONIC ns (process.hrtime), same clock in every process. */
export const TOKEN_MESSAGE_BYTES = 16;

export function tokenMessage(index: number): Buffer {
  const msg = Buffer.allocUnsafe(5 + TOKEN_MESSAGE_BYTES);
  msg[0] = 0;
  msg.writeUInt32BE(TOKEN_MESSAGE_BYTES, 1);
  msg.writeBigUInt64BE(process.hrtime.bigint(), 5);
  msg.writeUInt32BE(index, 13);
  msg.writeUInt32BE(1000 + (index % 30000), 17); // the "token id"
  return msg;
}

export function tokenTimestampNs(message: Buffer): bigint {
  return message.readBigUInt64BE(0);
}
