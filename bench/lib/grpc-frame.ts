/**
 * Benchmark token messages. Framing itself is the project's own (src/protocol/grpc/framing.ts,
 * src/protocol/grpc/grpc-frames.ts); this adds only the payload carrying the engine-side send time.
 */

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

/**
 * The engine send time of the token message whose payload starts at `offset`, as a number of ns
 * (read as two 32-bit halves: no BigInt per message in the client; exact while the machine has
 * been up for less than 2^53 ns, 104 days, and off by a few ns beyond).
 */
export function tokenSentNs(buf: Buffer, offset: number): number {
  return buf.readUInt32BE(offset) * 4294967296 + buf.readUInt32BE(offset + 4);
}
