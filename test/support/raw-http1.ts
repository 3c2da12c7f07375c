/**
 * HTTP/1.1 over a bare node:net socket, for hostile-client tests: write any bytes (smuggling
 * headers, broken chunks, a body one byte at a time), read the answer as it came off the wire
 * (status line, headers, body by Content-Length or chunked, or up to the close), and see when
 * the server closed the connection. No HTTP client would send these requests, hence no client.
 *
 *   const c = await RawHttp1.connect(port);
 *   c.write(rawRequest('POST', '/v1/completions', { 'content-type': 'application/json' }, '{}'));
 *   const res = await c.response();   // { status, headers, body }
 *   await c.closed();                 // resolves when the server closed (or reset) the socket
 */
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  readonly status: number;
  /** Lower-cased names; a repeated header keeps its last value. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** One request's bytes: a request line, the headers as given (none added), a blank line, the body. */
export function rawRequest(method: string, path: string, headers: Record<string, string | number> = {}, body = ''): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${lines.join('')}\r\n${body}`;
}

/** A JSON request with its Content-Length. */
export function jsonRequest(method: string, path: string, body: unknown, headers: Record<string, string> = {}): string {
  const text = JSON.stringify(body);
  return rawRequest(method, path, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }, text);
}

export class RawHttp1 {
  /** Not yet taken by response(). */
  private received = Buffer.alloc(0);
  private readonly transcript: Buffer[] = [];
  private isClosed = false;
  private readonly waiters: (() => void)[] = [];
  private readonly closedAt: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.transcript.push(chunk);
      this.wake();
    });
    // A reset after the server's answer is how node ends a refused connection: the bytes before it count.
    socket.on('error', () => undefined);
    this.closedAt = new Promise((resolve) =>
      socket.once('close', () => {
        this.isClosed = true;
        this.wake();
        resolve();
      }),
    );
  }

  static connect(port: number, host = '127.0.0.1', timeoutMs = 5000): Promise<RawHttp1> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no TCP connection to ${host}:${port} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(new RawHttp1(socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  get closedByServer(): boolean {
    return this.isClosed;
  }

  /** Everything received so far (responses taken included), as text. */
  get text(): string {
    return Buffer.concat(this.transcript).toString('latin1');
  }

  private get pending(): string {
    return this.received.toString('latin1');
  }

  write(bytes: string | Buffer): void {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  /** Writes `bytes` one at a time, `gapMs` apart, until all are sent, the socket closes, or `maxBytes` went. */
  async drip(bytes: string, gapMs: number, maxBytes = bytes.length): Promise<number> {
    let sent = 0;
    while (sent < Math.min(bytes.length, maxBytes) && !this.isClosed && !this.socket.destroyed) {
      this.socket.write(bytes[sent]!);
      sent++;
      await new Promise((resolve) => setTimeout(resolve, gapMs)); // the pacing of the attack
    }
    return sent;
  }

  /** The next complete response (the first one unless earlier ones were taken), or a failure naming what did arrive. */
  async response(timeoutMs = 5000): Promise<RawResponse> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const parsed = parseResponse(this.received, this.isClosed);
      if (parsed) {
        this.received = this.received.subarray(parsed.length);
        return parsed.response;
      }
      if (this.isClosed) throw new Error(`connection closed before a complete response; received ${JSON.stringify(this.pending.slice(0, 500))}`);
      if (Date.now() >= deadline) throw new Error(`no complete response within ${timeoutMs} ms; received ${JSON.stringify(this.pending.slice(0, 500))}`);
      await this.nextEvent(deadline - Date.now());
    }
  }

  /** Resolves once the server has closed the connection; fails after `timeoutMs`. */
  async closed(timeoutMs = 5000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`the server kept the connection open for ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.closedAt, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  destroy(): void {
    this.socket.destroy();
  }

  private nextEvent(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(ms, 0));
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.push(done);
    });
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}

/** One response at the start of `bytes` and how many bytes it took, or undefined while incomplete. */
function parseResponse(bytes: Buffer, closed: boolean): { response: RawResponse; length: number } | undefined {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const [statusLine = '', ...headerLines] = bytes.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/u.exec(statusLine)?.[1]);
  if (!Number.isInteger(status)) throw new Error(`not an HTTP/1.1 status line: ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const bodyStart = headEnd + 4;
  const done = (bodyEnd: number, body: Buffer) => ({ response: { status, headers, body: body.toString('utf8') }, length: bodyEnd });
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const chunks: Buffer[] = [];
    let at = bodyStart;
    for (;;) {
      const lineEnd = bytes.indexOf('\r\n', at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
      if (Number.isNaN(size)) throw new Error('bad chunk size in the response');
      if (bytes.length < lineEnd + 2 + size + 2) return undefined;
      if (size === 0) return done(lineEnd + 4, Buffer.concat(chunks));
      chunks.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = headers['content-length'];
  if (length !== undefined) {
    const end = bodyStart + Number(length);
    return bytes.length >= end ? done(end, bytes.subarray(bodyStart, end)) : undefined;
  }
  // Neither: the body runs to the close.
  return closed ? done(bytes.length, bytes.subarray(bodyStart)) : undefined;
}
