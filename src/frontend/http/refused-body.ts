/**
 * A body refused for its size (over --max-body-bytes: Fastify answers from Content-Length alone,
 * before reading a byte, or stops reading at the limit) is still on its way. Fastify then closes
 * the connection, which a client still uploading sees as a broken pipe rather than the 413 and
 * its reason (undici's fetch, as the OpenAI SDK for Node uses it, fails with EPIPE). So the rest
 * is read and dropped, chunk by chunk (no copy is kept: the cost is the bandwidth), and the
 * connection stays open for the answer; past `maxBytes` more it is closed after all.
 */
import type { IncomingMessage } from 'node:http';

export function discardRestOfBody(raw: IncomingMessage, maxBytes: number): void {
  if (raw.complete || raw.destroyed) return;
  let discarded = 0;
  raw.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > maxBytes) raw.socket.destroy();
  });
}
