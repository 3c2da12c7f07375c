/**
 * A hand-driven HTTP/2 "engine" on a raw TCP socket, for tests of how a client judges liveness:
 * it can accept TCP and stay mute, send its SETTINGS only when told, and stop or resume answering
 * PINGs (PINGs received while stopped are answered on resume, as a paused process would).
 * Every other frame is read and ignored.
 */
import { createServer, type Server, type Socket } from 'node:net';

const PREFACE_BYTES = 24; // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
const FRAME_HEADER_BYTES = 9;
const SETTINGS = 0x4;
const PING = 0x6;
const ACK = 0x1;

export interface RawH2PeerOptions {
  /** Send SETTINGS as soon as a connection arrives (otherwise only on sendSettings()). Default true. */
  readonly settingsOnConnect?: boolean;
  /** Answer PINGs from the start. Default true. */
  readonly answerPings?: boolean;
}

export interface RawH2Peer {
  readonly port: number;
  readonly address: string;
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** Connections whose client preface and first SETTINGS frame have arrived. */
  readonly handshakesSeen: number;
  /** PINGs received and not (yet) answered. */
  readonly pingsPending: number;
  sendSettings(): void;
  setAnswerPings(answer: boolean): void;
  close(): Promise<void>;
}

function frame(type: number, flags: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  return Buffer.concat([header, payload]);
}

export async function startRawH2Peer(options: RawH2PeerOptions = {}): Promise<RawH2Peer> {
  const sockets = new Set<Socket>();
  const pending: { socket: Socket; payload: Buffer }[] = [];
  const settingsSent = new WeakSet<Socket>();
  const unacked = new Set<Socket>();
  let answerPings = options.answerPings ?? true;
  const sendSettings = (socket: Socket): void => {
    settingsSent.add(socket);
    socket.write(frame(SETTINGS, 0));
    if (unacked.delete(socket)) socket.write(frame(SETTINGS, ACK));
  };
  let connections = 0;
  let handshakesSeen = 0;

  const onFrame = (socket: Socket, type: number, flags: number, payload: Buffer): void => {
    if (type === SETTINGS && !(flags & ACK)) {
      handshakesSeen++;
      // A server's first frame must be its own SETTINGS: hold the ACK until those are sent.
      if (settingsSent.has(socket)) socket.write(frame(SETTINGS, ACK));
      else unacked.add(socket);
    } else if (type === PING && !(flags & ACK)) {
      if (answerPings) socket.write(frame(PING, ACK, payload));
      else pending.push({ socket, payload });
    }
  };

  const server: Server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      unacked.delete(socket);
    });
    socket.on('error', () => {});
    if (options.settingsOnConnect ?? true) sendSettings(socket);
    let buffered = Buffer.alloc(0);
    let prefaceRead = false;
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!prefaceRead) {
        if (buffered.length < PREFACE_BYTES) return;
        buffered = buffered.subarray(PREFACE_BYTES);
        prefaceRead = true;
      }
      while (buffered.length >= FRAME_HEADER_BYTES) {
        const length = buffered.readUIntBE(0, 3);
        if (buffered.length < FRAME_HEADER_BYTES + length) return;
        onFrame(socket, buffered[3]!, buffered[4]!, buffered.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length));
        buffered = buffered.subarray(FRAME_HEADER_BYTES + length);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };

  return {
    port,
    address: `127.0.0.1:${port}`,
    get connections() {
      return connections;
    },
    get handshakesSeen() {
      return handshakesSeen;
    },
    get pingsPending() {
      return pending.length;
    },
    sendSettings() {
      for (const socket of sockets) if (!settingsSent.has(socket)) sendSettings(socket);
    },
    setAnswerPings(answer) {
      answerPings = answer;
      if (!answer) return;
      for (const { socket, payload } of pending.splice(0)) if (!socket.destroyed) socket.write(frame(PING, ACK, payload));
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
