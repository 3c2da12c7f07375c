/**
 * A TLS front for a plaintext (h2c) server, the way an engine serving gRPC over TLS looks to the
 * sidecar: TLS with ALPN h2 on its own 127.0.0.1 port, bytes passed through to `target`. With
 * `clientCa`, clients must present a certificate signed by it (mTLS).
 *
 *   const front = await startTlsTerminator(engine.address, { cert, key, clientCa });
 *   front.address  ...  await front.close();
 */
import { connect as netConnect, type Socket } from 'node:net';
import { createServer, type TLSSocket } from 'node:tls';
import { parseHostPort } from '../../src/platform/config/host-port.js';

export interface TlsTerminator {
  readonly port: number;
  readonly address: string;
  /** Handshakes completed so far. */
  readonly handshakes: number;
  close(): Promise<void>;
}

export async function startTlsTerminator(target: string, tls: { cert: Buffer; key: Buffer; clientCa?: Buffer }): Promise<TlsTerminator> {
  const to = parseHostPort(target, false);
  if (typeof to === 'string') throw new Error(to);
  const sockets = new Set<Socket>();
  let handshakes = 0;
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const server = createServer(
    { cert: tls.cert, key: tls.key, ALPNProtocols: ['h2'], ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}) },
    (socket: TLSSocket) => {
      handshakes++;
      const upstream = netConnect(to.port, to.host);
      track(upstream);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
      upstream.on('close', () => socket.destroy());
    },
  );
  server.on('connection', track);
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    address: `127.0.0.1:${port}`,
    get handshakes() {
      return handshakes;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}
