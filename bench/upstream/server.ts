/**
 * The benchmark's own upstream: a raw node:http2 gRPC server that answers as fast as Node can,
 * so what the benchmark sees is the proxy's cost, not an engine's. Run as its own process
 * (pinned with taskset by the launcher): `server.ts PORT TICK_MS`; prints
 * `bench-upstream: listening on PORT`.
 *
 * Methods, chosen by path, parameters in request headers:
 *   /bench.Bench/Unary    echo the request message at once
 *   /bench.Bench/Slow     echo after x-bench-hold-ms (default 200) - a slow engine
 *   /bench.Bench/Stream   headers at once, then x-bench-count one-token messages, one per decode
 *                         tick (the global timer below), each carrying the engine-side send time
 *                         (CLOCK_MONOTONIC ns); OK trailers right after the last
 *   /bench.Bench/Hold     response headers at once, then nothing until the client cancels
 */
import { createServer, type ServerHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { tokenMessage } from '../lib/grpc-frame.js';

const RESPONSE_HEADERS = { ':status': 200, 'content-type': 'application/grpc' };
const OK_TRAILERS = { 'grpc-status': '0' };

function headerNumber(headers: IncomingHttpHeaders, name: string, fallback: number): number {
  const v = Number(headers[name]);
  return Number.isFinite(v) && v >= 0 ? v : fallback;
}

function readBody(stream: ServerHttp2Stream, then: (body: Buffer) => void): void {
  const parts: Buffer[] = [];
  stream.on('data', (c: Buffer) => parts.push(c));
  stream.on('end', () => then(parts.length === 1 ? parts[0]! : Buffer.concat(parts)));
}

function answer(stream: ServerHttp2Stream, body: Buffer): void {
  if (stream.destroyed) return;
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
  stream.end(body);
}

// The decode loop: one global timer; each tick writes one message, as its own write, to every
// open stream (one decode step of a batch of sequences). Ticks are scheduled against the start
// time (t0 + k * tick), so the period does not drift with the time a burst takes; ticks that
// could not run on time are skipped, not bunched, and counted.
interface TokenStream {
  readonly stream: ServerHttp2Stream;
  left: number;
  sent: number;
}
const decoding = new Set<TokenStream>();
const tickNs = BigInt(Math.round(Number(process.argv[3] ?? 20) * 1e6));
const t0 = process.hrtime.bigint();
/** Index of the tick the pending timer runs (tick k is due at t0 + k * tick). */
let nextTick = 1n;
let skippedTicks = 0;

function decodeStep(): void {
  for (const s of decoding) {
    if (s.stream.destroyed || s.stream.closed) {
      decoding.delete(s);
      continue;
    }
    s.stream.write(tokenMessage(s.sent++));
    if (--s.left === 0) {
      decoding.delete(s);
      s.stream.end(); // OK trailers follow ('wantTrailers')
    }
  }
  const now = process.hrtime.bigint();
  const firstFuture = (now - t0) / tickNs + 1n;
  nextTick++;
  if (nextTick < firstFuture) {
    skippedTicks += Number(firstFuture - nextTick);
    nextTick = firstFuture;
  }
  setTimeout(decodeStep, Number(t0 + nextTick * tickNs - now) / 1e6).unref();
}
setTimeout(decodeStep, Number(tickNs) / 1e6).unref();

function streamTokens(stream: ServerHttp2Stream, count: number): void {
  if (stream.destroyed || stream.closed) return; // cancelled before the request finished arriving
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
  if (count === 0) return void stream.end();
  decoding.add({ stream, left: count, sent: 0 });
}

let held = 0;
const server = createServer({
  settings: { initialWindowSize: 1 << 20, maxConcurrentStreams: 1_000_000 },
  maxSessionMemory: 1024,
});
server.on('session', (session) => session.on('error', () => {}));
server.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  switch (headers[':path']) {
    case '/bench.Bench/Unary':
      return readBody(stream, (body) => answer(stream, body));
    case '/bench.Bench/Slow': {
      const holdMs = headerNumber(headers, 'x-bench-hold-ms', 200);
      return readBody(stream, (body) => {
        const timer = setTimeout(() => answer(stream, body), holdMs);
        stream.on('close', () => clearTimeout(timer));
      });
    }
    case '/bench.Bench/Stream': {
      const count = headerNumber(headers, 'x-bench-count', 100);
      return readBody(stream, () => streamTokens(stream, count));
    }
    case '/bench.Bench/Hold':
      held++;
      stream.on('close', () => held--);
      stream.on('data', () => {});
      return stream.respond(RESPONSE_HEADERS);
    default:
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' }, { endStream: true });
  }
});

const port = Number(process.argv[2] ?? 0);
server.listen(port, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`bench-upstream: listening on ${address.port}\n`);
});
// Held-call count on request, for the memory scenario's sanity check.
process.on('SIGUSR2', () => process.stdout.write(`bench-upstream: held ${held}, decoding ${decoding.size}, skipped ticks ${skippedTicks}\n`));
// A benchmark upstream must not die on one odd stream: log and go on (the run checks stderr).
process.on('uncaughtException', (err) => process.stderr.write(`bench-upstream: ${err.stack ?? err}\n`));
process.on('SIGTERM', () => {
  server.close();
  process.exit(0);
});
