/**
 * A TCP relay for HTTP/2 between a client (the sidecar) and a server (the engine), on 127.0.0.1
 * with a port the OS picks, that a test acts on one connection at a time: kill it (both sockets
 * destroyed at once, as a dead peer does), hold the server's bytes (a server that stops answering,
 * PINGs included) and release them, or send the client a GOAWAY as if from the server.
 *
 * It reads the frames going by without changing them, to know each connection's streams: which
 * request (by a header the test names, `tagHeader`) went on which connection, and which were still
 * in flight when a connection was killed. A stream is in flight from the client's HEADERS until
 * the server's END_STREAM has been passed on to the client, or either side reset it. The server's
 * bytes are passed on whole frames at a time, so a GOAWAY can go in between.
 *
 * The GOAWAY is the first of RFC 9113's graceful pair (section 6.8): NO_ERROR with the largest
 * stream id, so the client opens no new stream on that connection and every stream it has sent
 * is processed. The server never learns of it and serves those streams to their end; the client
 * then closes the connection.
 *
 *   const relay = await startH2Relay(enginePort, { tagHeader: 'x-call' });
 *   // point the client at relay.port; later:
 *   relay.connections[0]!.goaway(); const lost = relay.connections[1]!.kill();
 */
import { createServer, connect } from 'node:net';
import { Flags, FrameType, HpackDecoder, PREFACE, frame, headerBlockOf, type Frame } from './h2-wire.js';

export interface RelayedStream {
  readonly id: number;
  /** The request's `tagHeader` value, if it had one. */
  readonly tag: string | undefined;
  /** Ended: the server's END_STREAM passed on, or a reset from either side; or cut by kill(). */
  ended: boolean;
}

export interface RelayConnection {
  /** 0 for the first connection accepted, then 1, 2, ... */
  readonly index: number;
  /** The server's first SETTINGS has been passed on to the client. */
  readonly serverSettingsSent: boolean;
  /** The client has acknowledged the server's SETTINGS: it has read them, and uses the connection. */
  readonly clientSettingsAcked: boolean;
  /** Neither socket has closed. */
  readonly open: boolean;
  readonly killed: boolean;
  readonly goneAway: boolean;
  /** Every stream the client opened on this connection, by id. */
  readonly streams: ReadonlyMap<number, RelayedStream>;
  /** Destroys both sockets at once; returns the streams that were in flight. */
  kill(): RelayedStream[];
  /** Sends the client GOAWAY(NO_ERROR, last stream 2^31-1) as if from the server. */
  goaway(): void;
  /** Stops passing the server's bytes on (they wait in the relay) until release(). */
  hold(): void;
  release(): void;
}

export interface H2Relay {
  readonly port: number;
  readonly address: string;
  readonly connections: readonly RelayConnection[];
  /** The most tagged streams that were in flight at once, over every connection. */
  readonly maxTaggedInFlight: number;
  /** Tagged streams in flight now, over every connection. */
  readonly taggedInFlight: number;
  /** Kills every connection and stops listening. */
  close(): Promise<void>;
}

export interface H2RelayOptions {
  /** A request header whose value names the request in `streams` (lower case). */
  readonly tagHeader?: string;
}

const FRAME_HEADER_BYTES = 9;
const LAST_STREAM_ID = 0x7fffffff;

export async function startH2Relay(serverPort: number, options: H2RelayOptions = {}): Promise<H2Relay> {
  const connections: RelayConnection[] = [];
  let taggedInFlight = 0;
  let maxTaggedInFlight = 0;
  const end = (stream: RelayedStream | undefined): void => {
    if (stream === undefined || stream.ended) return;
    stream.ended = true;
    if (stream.tag !== undefined) taggedInFlight--;
  };

  const server = createServer((client) => {
    const upstream = connect(serverPort, '127.0.0.1');
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const streams = new Map<number, RelayedStream>();
    const decoder = new HpackDecoder();
    let open = true;
    let killed = false;
    let goneAway = false;
    let serverSettingsSent = false;
    let clientSettingsAcked = false;
    let prefaceLeft = PREFACE.length;
    let clientBytes: Buffer = Buffer.alloc(0);
    let serverBytes: Buffer = Buffer.alloc(0);
    let headerBlock: { id: number; parts: Buffer[] } | undefined;

    const onClientFrame = (f: Frame): void => {
      if (f.type === FrameType.HEADERS || f.type === FrameType.CONTINUATION) {
        if (f.type === FrameType.HEADERS) headerBlock = { id: f.streamId, parts: [] };
        headerBlock?.parts.push(f.type === FrameType.HEADERS ? headerBlockOf(f) : f.payload);
        if (!(f.flags & Flags.END_HEADERS) || headerBlock === undefined) return;
        const { id, parts } = headerBlock;
        headerBlock = undefined;
        // Every block goes through the decoder, in order, to keep its dynamic table right.
        const headers = decoder.decode(Buffer.concat(parts));
        if (streams.has(id)) return; // the client's trailers
        const tag = options.tagHeader === undefined ? undefined : headers.find(([name]) => name === options.tagHeader)?.[1];
        streams.set(id, { id, tag, ended: false });
        if (tag !== undefined) maxTaggedInFlight = Math.max(maxTaggedInFlight, ++taggedInFlight);
      } else if (f.type === FrameType.RST_STREAM) {
        end(streams.get(f.streamId));
      } else if (f.type === FrameType.SETTINGS && f.flags & Flags.ACK) {
        clientSettingsAcked = true;
      }
    };
    const onServerFrame = (type: number, flags: number, streamId: number): void => {
      if (type === FrameType.SETTINGS && !(flags & Flags.ACK)) serverSettingsSent = true;
      else if (type === FrameType.RST_STREAM || ((type === FrameType.HEADERS || type === FrameType.DATA) && flags & Flags.END_STREAM))
        end(streams.get(streamId));
    };

    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      let bytes = chunk;
      if (prefaceLeft > 0) {
        const skip = Math.min(prefaceLeft, bytes.length);
        prefaceLeft -= skip;
        bytes = bytes.subarray(skip);
      }
      clientBytes = clientBytes.length ? Buffer.concat([clientBytes, bytes]) : bytes;
      while (clientBytes.length >= FRAME_HEADER_BYTES) {
        const length = clientBytes.readUIntBE(0, 3);
        if (clientBytes.length < FRAME_HEADER_BYTES + length) break;
        const type = clientBytes[3]!;
        // DATA is passed over without a copy: only these are read.
        if (type === FrameType.HEADERS || type === FrameType.CONTINUATION || type === FrameType.RST_STREAM || type === FrameType.SETTINGS) {
          onClientFrame({
            type,
            flags: clientBytes[4]!,
            streamId: clientBytes.readUInt32BE(5) & 0x7fffffff,
            payload: Buffer.from(clientBytes.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length)),
          });
        }
        clientBytes = clientBytes.subarray(FRAME_HEADER_BYTES + length);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      serverBytes = serverBytes.length ? Buffer.concat([serverBytes, chunk]) : chunk;
      let whole = 0;
      while (serverBytes.length - whole >= FRAME_HEADER_BYTES) {
        const length = serverBytes.readUIntBE(whole, 3);
        if (serverBytes.length - whole < FRAME_HEADER_BYTES + length) break;
        onServerFrame(serverBytes[whole + 3]!, serverBytes[whole + 4]!, serverBytes.readUInt32BE(whole + 5) & 0x7fffffff);
        whole += FRAME_HEADER_BYTES + length;
      }
      if (whole === 0) return;
      client.write(serverBytes.subarray(0, whole));
      serverBytes = serverBytes.subarray(whole);
    });
    const shut = (): void => {
      open = false;
      client.destroy();
      upstream.destroy();
    };
    client.on('error', () => {});
    upstream.on('error', () => {});
    client.on('close', shut);
    upstream.on('close', shut);

    connections.push({
      index: connections.length,
      get serverSettingsSent() {
        return serverSettingsSent;
      },
      get clientSettingsAcked() {
        return clientSettingsAcked;
      },
      get open() {
        return open;
      },
      get killed() {
        return killed;
      },
      get goneAway() {
        return goneAway;
      },
      streams,
      kill() {
        killed = true;
        const inFlight = [...streams.values()].filter((s) => !s.ended);
        inFlight.forEach(end);
        shut();
        return inFlight;
      },
      goaway() {
        goneAway = true;
        const payload = Buffer.alloc(8);
        payload.writeUInt32BE(LAST_STREAM_ID, 0);
        payload.writeUInt32BE(0, 4);
        client.write(frame(FrameType.GOAWAY, 0, 0, payload));
      },
      hold: () => void upstream.pause(),
      release: () => void upstream.resume(),
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    address: `127.0.0.1:${port}`,
    connections,
    get maxTaggedInFlight() {
      return maxTaggedInFlight;
    },
    get taggedInFlight() {
      return taggedInFlight;
    },
    async close() {
      for (const connection of connections) if (connection.open) connection.kill();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
