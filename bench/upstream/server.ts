/**
 * The benchmark's own upstream: a raw node:http2 gRPC server that answers as fast as Node can,
 * so what the benchmark sees is the proxy's cost, not an engine's. Run as its own process
 * (pinned with taskset by the launcher); prints `bench-upstream: listening on PORT`.
 *
 * Methods, chosen by path, parameters in request headers:
 *   /bench.Bench/Unary    echo the request message at once
 *   /bench.Bench/Slow     echo after x-bench-hold-ms (default 200) - a slow engine
 *   /bench.Bench/Stream   x-bench-count one-token messages, each carrying the engine-side send
 *                         time (CLOCK_MONOTONIC ns); x-bench-interval-ms 0 = one message per
 *                         stream per event-loop turn (flood), otherwise one per interval (paced)
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

// Flood streams: each event-loop turn writes one message to every stream that is not waiting
// for 'drain', so every message is its own write, as an engine emitting tokens would do.
interface FloodStream {
  stream: ServerHttp2Stream;
  left: number;
  sent: number;
  blocked: boolean;
}
const flooding = new Set<FloodStream>();
let pumpScheduled = false;

function pump(): void {
  pumpScheduled = false;
  for (const f of flooding) {
    if (f.blocked) continue;
    if (f.stream.destroyed) {
      flooding.delete(f);
      continue;
    }
    if (f.left === 0) {
      flooding.delete(f);
      f.stream.end();
      continue;
    }
    f.left--;
    if (!f.stream.write(tokenMessage(f.sent++))) {
      f.blocked = true;
      f.stream.once('drain', () => {
        f.blocked = false;
        schedulePump();
      });
    }
  }
  if (flooding.size) schedulePump();
}

function schedulePump(): void {
  if (pumpScheduled) return;
  pumpScheduled = true;
  setImmediate(pump);
}

function streamTokens(stream: ServerHttp2Stream, count: number, intervalMs: number): void {
  if (stream.destroyed || stream.closed) return; // cancelled before the request finished arriving
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
  if (intervalMs === 0) {
    flooding.add({ stream, left: count, sent: 0, blocked: false });
    return schedulePump();
  }
  let sent = 0;
  const timer = setInterval(() => {
    if (stream.destroyed) return clearInterval(timer);
    if (sent === count) {
      clearInterval(timer);
      return void stream.end();
    }
    stream.write(tokenMessage(sent++));
  }, intervalMs);
  stream.on('close', () => clearInterval(timer));
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
      const intervalMs = headerNumber(headers, 'x-bench-interval-ms', 0);
      return readBody(stream, () => streamTokens(stream, count, intervalMs));
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
process.on('SIGUSR2', () => process.stdout.write(`bench-upstream: held ${held}\n`));
// A benchmark upstream must not die on one odd stream: log and go on (the run checks stderr).
process.on('uncaughtException', (err) => process.stderr.write(`bench-upstream: ${err.stack ?? err}\n`));
process.on('SIGTERM', () => {
  server.close();
  process.exit(0);
});
