/** Shared bits of the benchmark's node:http2 load clients (each runs as its own pinned process). */
import { connect, type ClientHttp2Session } from 'node:http2';

/** Parameters arrive as one JSON argument; results leave as one JSON line on stdout. */
export function readParams<T>(): T {
  const raw = process.argv[2];
  if (!raw) throw new Error('expected one JSON argument');
  return JSON.parse(raw) as T;
}

export function emit(result: unknown): void {
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

export function openSessions(port: number, count: number): ClientHttp2Session[] {
  const sessions: ClientHttp2Session[] = [];
  for (let i = 0; i < count; i++) {
    const session = connect(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: 1 << 20, enablePush: false }, maxSessionMemory: 1024 });
    session.on('error', () => {});
    sessions.push(session);
  }
  return sessions;
}

export function grpcHeaders(path: string, extra: Record<string, string> = {}): Record<string, string> {
  return { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra };
}

/** Hard stop so a wedged client can never outlive its run. */
export function exitAfter(ms: number): void {
  setTimeout(() => {
    process.stderr.write(`client: hard timeout after ${ms} ms\n`);
    process.exit(3);
  }, ms).unref();
}
