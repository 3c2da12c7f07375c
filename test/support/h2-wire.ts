/**
 * HTTP/2 on the wire, for hostile-input tests: a frame writer that sends exactly the bytes a
 * test asks for (including the ones a well-behaved library refuses to send), a frame reader,
 * and a client (`H2Wire`) over a plain TCP socket that keeps just enough state to read answers:
 * per-stream response headers, trailers, data and resets. HPACK lives in hpack.ts.
 */
import { Socket, connect as netConnect } from 'node:net';
import { HpackDecoder, encodeHeaders, type HeaderList } from './hpack.js';

export { HpackDecoder, encodeHeaders, huffmanCode, huffmanDecode, huffmanEncode, type HeaderList } from './hpack.js';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FrameType = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;

export const Flags = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

export const ErrorCode = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  SETTINGS_TIMEOUT: 4,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  CONNECT_ERROR: 10,
  ENHANCE_YOUR_CALM: 11,
  INADEQUATE_SECURITY: 12,
  HTTP_1_1_REQUIRED: 13,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 1,
  ENABLE_PUSH: 2,
  MAX_CONCURRENT_STREAMS: 3,
  INITIAL_WINDOW_SIZE: 4,
  MAX_FRAME_SIZE: 5,
  MAX_HEADER_LIST_SIZE: 6,
} as const;

export const DEFAULT_WINDOW = 65_535;

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

// ---------------------------------------------------------------------------------------------
// Frame writer

export function frame(type: number, flags: number, streamId: number, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

export function settingsFrame(settings: [id: number, value: number][] = []): Buffer {
  const payload = Buffer.alloc(6 * settings.length);
  settings.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, 6 * i);
    payload.writeUInt32BE(value >>> 0, 6 * i + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, payload);
}

export const settingsAckFrame = (): Buffer => frame(FrameType.SETTINGS, Flags.ACK, 0);

export function headersFrame(streamId: number, block: Uint8Array, opts: { endStream?: boolean; endHeaders?: boolean } = {}): Buffer {
  const flags = (opts.endStream ? Flags.END_STREAM : 0) | (opts.endHeaders === false ? 0 : Flags.END_HEADERS);
  return frame(FrameType.HEADERS, flags, streamId, block);
}

export const continuationFrame = (streamId: number, block: Uint8Array, endHeaders = false): Buffer =>
  frame(FrameType.CONTINUATION, endHeaders ? Flags.END_HEADERS : 0, streamId, block);

export const dataFrame = (streamId: number, data: Uint8Array, endStream = false): Buffer =>
  frame(FrameType.DATA, endStream ? Flags.END_STREAM : 0, streamId, data);

export function rstStreamFrame(streamId: number, code: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code >>> 0);
  return frame(FrameType.RST_STREAM, 0, streamId, payload);
}

export function pingFrame(data: Uint8Array = Buffer.alloc(8), ack = false): Buffer {
  const payload = Buffer.alloc(8);
  payload.set(data.subarray(0, 8));
  return frame(FrameType.PING, ack ? Flags.ACK : 0, 0, payload);
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment & 0x7fffffff);
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, payload);
}

// ---------------------------------------------------------------------------------------------
// Frame reader

/** Splits a byte stream into frames; `push` returns the frames completed by this chunk. */
export class FrameReader {
  private buffer: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    const frames: Frame[] = [];
    while (this.buffer.length >= 9) {
      const length = this.buffer.readUIntBE(0, 3);
      if (this.buffer.length < 9 + length) break;
      frames.push({
        type: this.buffer[3]!,
        flags: this.buffer[4]!,
        streamId: this.buffer.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(this.buffer.subarray(9, 9 + length)),
      });
      this.buffer = this.buffer.subarray(9 + length);
    }
    return frames;
  }
}

/** The header block fragment of a HEADERS frame, without padding and priority fields. */
export function headerBlockOf(f: Frame): Buffer {
  let payload = f.payload;
  let padLength = 0;
  if (f.flags & Flags.PADDED) {
    padLength = payload[0]!;
    payload = payload.subarray(1);
  }
  if (f.type === FrameType.HEADERS && f.flags & Flags.PRIORITY) payload = payload.subarray(5);
  return payload.subarray(0, payload.length - padLength);
}

// ---------------------------------------------------------------------------------------------
// A raw client connection

export interface StreamState {
  readonly id: number;
  /** Header blocks received, in order: response headers first, then trailers. */
  readonly headerBlocks: HeaderList[];
  dataBytes: number;
  /** Peer ended its side (END_STREAM received). */
  remoteEnded: boolean;
  /** RST_STREAM code received from the peer. */
  rstCode?: number;
  /** We reset the stream (sendData stops). */
  localReset: boolean;
  /** Our send window for this stream. */
  sendWindow: number;
}

export interface H2WireOptions {
  /** Our SETTINGS sent with the preface (default none). */
  settings?: [number, number][];
  /** Answer the peer's SETTINGS with an ACK (default: true with the handshake). */
  ackSettings?: boolean;
  /** Answer the peer's PINGs (default: true with the handshake). */
  ackPings?: boolean;
  /** Give back flow-control credit for DATA received, on the connection and the stream (default: true with the handshake). */
  autoWindowUpdate?: boolean;
  /** Send the preface and SETTINGS on connect (default true). */
  handshake?: boolean;
  /** Keep our side open after the peer's FIN, as a client that never closes would (default false). */
  halfOpen?: boolean;
}

/** The first header value named `name` in a block. */
export function headerValue(block: HeaderList | undefined, name: string): string | undefined {
  return block?.find(([n]) => n === name)?.[1];
}

/**
 * A client connection written frame by frame. It parses everything the peer sends, keeps
 * per-stream state, and tracks send windows so `sendData` respects flow control when asked to.
 */
export class H2Wire {
  readonly socket: Socket;
  readonly frames: Frame[] = [];
  readonly streams = new Map<number, StreamState>();
  /** SETTINGS the peer sent (last value wins). */
  readonly peerSettings = new Map<number, number>();
  peerSettingsReceived = false;
  goaway?: { lastStreamId: number; code: number; debug: string };
  closed = false;
  closedAt?: number;
  bytesReceived = 0;
  nextStreamId = 1;
  private pingSeq = 0;
  connectionSendWindow = DEFAULT_WINDOW;
  private readonly reader = new FrameReader();
  private readonly decoder = new HpackDecoder();
  private pendingHeaders: { streamId: number; parts: Buffer[]; endStream: boolean } | undefined;
  private readonly waiters = new Set<() => void>();
  private readonly options: Required<H2WireOptions>;

  private constructor(socket: Socket, options: H2WireOptions) {
    this.socket = socket;
    // Without the handshake, answer nothing by default: any byte would count as (a bad) preface.
    const polite = options.handshake !== false;
    this.options = { settings: [], ackSettings: polite, ackPings: polite, autoWindowUpdate: polite, handshake: true, halfOpen: false, ...options };
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => {});
    socket.on('drain', () => this.notify());
    socket.on('close', () => {
      this.closed = true;
      this.closedAt = Date.now();
      this.notify();
    });
  }

  /** Opens a TCP connection to 127.0.0.1:port and (by default) sends the preface and SETTINGS. */
  static async connect(port: number, options: H2WireOptions = {}): Promise<H2Wire> {
    const socket = netConnect({ host: '127.0.0.1', port, allowHalfOpen: options.halfOpen === true });
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const wire = new H2Wire(socket, options);
    if (wire.options.handshake) wire.write(Buffer.concat([PREFACE, settingsFrame(wire.options.settings)]));
    return wire;
  }

  /** Writes raw bytes; false if the socket is gone. Resolves once they are handed to the kernel. */
  write(bytes: Uint8Array): boolean {
    if (this.closed || this.socket.destroyed) return false;
    this.socket.write(bytes);
    return true;
  }

  /** Writes and waits until the socket buffer has drained (bounded), so floods do not pile up in memory. */
  async writeAndDrain(bytes: Uint8Array, timeoutMs = 10_000): Promise<boolean> {
    if (this.closed || this.socket.destroyed) return false;
    if (this.socket.write(bytes)) return true;
    return this.until(() => this.socket.writableLength === 0 || this.closed, timeoutMs, 'socket drain').then(
      () => !this.closed,
      () => false,
    );
  }

  /** A new client stream id (1, 3, 5, ...). */
  allocStream(): number {
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    this.stream(id);
    return id;
  }

  stream(id: number): StreamState {
    let state = this.streams.get(id);
    if (!state) {
      state = {
        id,
        headerBlocks: [],
        dataBytes: 0,
        remoteEnded: false,
        localReset: false,
        sendWindow: this.peerSettings.get(Setting.INITIAL_WINDOW_SIZE) ?? DEFAULT_WINDOW,
      };
      this.streams.set(id, state);
    }
    return state;
  }

  /** HEADERS (one frame, END_HEADERS) opening a new stream; returns its id. */
  sendHeaders(headers: HeaderList, opts: { endStream?: boolean; streamId?: number } = {}): number {
    const id = opts.streamId ?? this.allocStream();
    this.stream(id);
    this.write(headersFrame(id, encodeHeaders(headers), { endStream: opts.endStream ?? false }));
    return id;
  }

  /**
   * DATA within the peer's flow-control windows: sends what fits, waits for WINDOW_UPDATE for the
   * rest (bounded). Resolves with the bytes sent (less than asked if the wait timed out).
   */
  async sendData(streamId: number, data: Uint8Array, opts: { endStream?: boolean; timeoutMs?: number } = {}): Promise<number> {
    const state = this.stream(streamId);
    const maxFrame = this.peerSettings.get(Setting.MAX_FRAME_SIZE) ?? 16_384;
    let sent = 0;
    const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
    while (sent < data.length) {
      const room = Math.min(this.connectionSendWindow, state.sendWindow, maxFrame, data.length - sent);
      if (room <= 0) {
        const gone = (): boolean => this.closed || state.rstCode !== undefined || state.localReset;
        if (gone()) return sent;
        try {
          await this.until(() => (this.connectionSendWindow > 0 && state.sendWindow > 0) || gone(), deadline - Date.now(), 'flow-control window');
        } catch {
          return sent;
        }
        continue;
      }
      if (state.localReset) return sent;
      const last = sent + room === data.length;
      if (!this.write(dataFrame(streamId, data.subarray(sent, sent + room), last && !!opts.endStream))) return sent;
      this.connectionSendWindow -= room;
      state.sendWindow -= room;
      sent += room;
    }
    if (data.length === 0 && opts.endStream) this.write(dataFrame(streamId, Buffer.alloc(0), true));
    return sent;
  }

  /**
   * Sends a PING and waits for its ACK: the peer has then read every frame sent before it.
   * Resolves false if the connection closed or went away first, or the wait timed out.
   */
  async roundTrip(timeoutMs = 10_000): Promise<boolean> {
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(++this.pingSeq, 4);
    const acked = (): boolean => this.frames.some((f) => f.type === FrameType.PING && f.flags & Flags.ACK && f.payload.equals(payload));
    if (!this.write(pingFrame(payload))) return false;
    return this.until(() => acked() || this.closed || this.goaway !== undefined, timeoutMs, 'a PING ack').then(
      () => acked(),
      () => false,
    );
  }

  rst(streamId: number, code: number = ErrorCode.CANCEL): boolean {
    this.stream(streamId).localReset = true;
    this.notify();
    return this.write(rstStreamFrame(streamId, code));
  }

  /** The stream has finished from the peer's side: END_STREAM or RST_STREAM received, or the connection is gone. */
  isDone(streamId: number): boolean {
    const s = this.streams.get(streamId);
    return this.closed || (!!s && (s.remoteEnded || s.rstCode !== undefined));
  }

  /** grpc-status of a stream (trailers, or a Trailers-Only response), if any arrived. */
  grpcStatus(streamId: number): number | undefined {
    const blocks = this.streams.get(streamId)?.headerBlocks ?? [];
    for (let i = blocks.length - 1; i >= 0; i--) {
      const value = headerValue(blocks[i], 'grpc-status');
      if (value !== undefined) return Number(value);
    }
    return undefined;
  }

  grpcMessage(streamId: number): string | undefined {
    const blocks = this.streams.get(streamId)?.headerBlocks ?? [];
    for (let i = blocks.length - 1; i >= 0; i--) {
      const value = headerValue(blocks[i], 'grpc-message');
      if (value !== undefined) return value;
    }
    return undefined;
  }

  /** Every grpc-message and GOAWAY debug text the peer sent, for "does not leak X" checks. */
  allText(): string {
    const texts: string[] = [];
    for (const s of this.streams.values()) for (const block of s.headerBlocks) for (const [n, v] of block) texts.push(`${n}: ${v}`);
    if (this.goaway) texts.push(this.goaway.debug);
    return texts.join('\n');
  }

  /** Resolves once `condition` holds (re-checked on every frame and on close), or rejects after `timeoutMs`. */
  until(condition: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    if (condition()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!condition()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(
        () => {
          this.waiters.delete(check);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
        },
        Math.max(0, timeoutMs),
      );
      this.waiters.add(check);
    });
  }

  /** Resolves once the peer has closed the TCP connection (bounded). */
  waitClosed(timeoutMs = 10_000): Promise<void> {
    return this.until(() => this.closed, timeoutMs, 'the peer to close the connection');
  }

  destroy(): void {
    this.socket.destroy();
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private onData(chunk: Buffer): void {
    this.bytesReceived += chunk.length;
    let frames: Frame[];
    try {
      frames = this.reader.push(chunk);
    } catch {
      return void this.socket.destroy();
    }
    for (const f of frames) this.onFrame(f);
    this.notify();
  }

  private onFrame(f: Frame): void {
    // Keep payloads of DATA frames out of memory: floods would otherwise grow the log.
    this.frames.push(f.type === FrameType.DATA ? { ...f, payload: Buffer.alloc(0) } : f);
    if (this.frames.length > 50_000) this.frames.splice(0, 25_000);
    switch (f.type) {
      case FrameType.SETTINGS:
        if (f.flags & Flags.ACK) break;
        for (let i = 0; i + 6 <= f.payload.length; i += 6) {
          const id = f.payload.readUInt16BE(i);
          const value = f.payload.readUInt32BE(i + 2);
          if (id === Setting.INITIAL_WINDOW_SIZE) {
            const delta = value - (this.peerSettings.get(id) ?? DEFAULT_WINDOW);
            for (const s of this.streams.values()) s.sendWindow += delta;
          }
          this.peerSettings.set(id, value);
        }
        this.peerSettingsReceived = true;
        if (this.options.ackSettings) this.write(settingsAckFrame());
        break;
      case FrameType.PING:
        if (!(f.flags & Flags.ACK) && this.options.ackPings) this.write(pingFrame(f.payload, true));
        break;
      case FrameType.GOAWAY:
        this.goaway = {
          lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff,
          code: f.payload.readUInt32BE(4),
          debug: f.payload.subarray(8).toString('latin1'),
        };
        break;
      case FrameType.WINDOW_UPDATE: {
        const increment = f.payload.readUInt32BE(0) & 0x7fffffff;
        if (f.streamId === 0) this.connectionSendWindow += increment;
        else this.stream(f.streamId).sendWindow += increment;
        break;
      }
      case FrameType.RST_STREAM:
        this.stream(f.streamId).rstCode = f.payload.readUInt32BE(0);
        break;
      case FrameType.HEADERS:
        this.pendingHeaders = { streamId: f.streamId, parts: [headerBlockOf(f)], endStream: (f.flags & Flags.END_STREAM) !== 0 };
        if (f.flags & Flags.END_HEADERS) this.finishHeaders();
        break;
      case FrameType.CONTINUATION:
        if (this.pendingHeaders?.streamId === f.streamId) {
          this.pendingHeaders.parts.push(f.payload);
          if (f.flags & Flags.END_HEADERS) this.finishHeaders();
        }
        break;
      case FrameType.DATA: {
        const s = this.stream(f.streamId);
        let length = f.payload.length;
        if (f.flags & Flags.PADDED) length -= 1 + f.payload[0]!;
        s.dataBytes += length;
        if (f.flags & Flags.END_STREAM) s.remoteEnded = true;
        if (this.options.autoWindowUpdate && f.payload.length > 0) {
          this.write(windowUpdateFrame(0, f.payload.length));
          if (!s.remoteEnded) this.write(windowUpdateFrame(f.streamId, f.payload.length));
        }
        break;
      }
    }
  }

  private finishHeaders(): void {
    const pending = this.pendingHeaders!;
    this.pendingHeaders = undefined;
    const s = this.stream(pending.streamId);
    s.headerBlocks.push(this.decoder.decode(Buffer.concat(pending.parts)));
    if (pending.endStream) s.remoteEnded = true;
  }
}

/** The request headers of a gRPC call to `path`, plus `extra` (names lower-case unless a test means otherwise). */
export function grpcRequestHeaders(path: string, extra: HeaderList = []): HeaderList {
  const base: HeaderList = [
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', path],
    [':authority', 'sidecar'],
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
  ];
  // A name in `extra` replaces the default of the same (lower-cased) name.
  const replaced = new Set(extra.map(([name]) => name.toLowerCase()));
  return [...base.filter(([name]) => !replaced.has(name)), ...extra];
}
