/**
 * The gRPC ingress: an h2c server (or HTTP/2 over TLS with --tls-cert) whose every stream walks
 * the same short path, top to bottom.
 *
 *   connection     SETTINGS_MAX_CONCURRENT_STREAMS, handshake and idle timeouts (connection-limits.ts)
 *   own services   grpc.health.v1 and dynamo.sidecar.v1.WorkerLoad are answered here (local-service.ts):
 *                  never an admission slot, never the engine, not counted as proxied calls, served while draining
 *   protocol       only gRPC (content-type application/grpc*) is proxied
 *   draining       after SIGTERM nothing new is admitted (UNAVAILABLE)
 *   deadline       grpc-timeout is parsed once; the sidecar times queued calls itself
 *   class          x-request-priority and x-tenant-id (call-class.ts): where the call queues
 *   admission      engine slot now, a place in the queue (by priority, round-robin across
 *                  tenants), or RESOURCE_EXHAUSTED
 *   upstream       connection-specific headers dropped; headers and bytes forwarded to the engine and back
 *
 * The last two live in ProxiedCall, the call's state machine, which owns the call's slot until
 * the engine's part of the call has ended.
 */
import {
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import type { HostPort } from '../../platform/config/host-port.js';
import type { ServerTls } from '../../platform/tls/server-tls.js';
import { parseGrpcTimeout } from '../../protocol/grpc/deadline.js';
import { GrpcStatus } from '../../protocol/grpc/status.js';
import { parseSloTtft, SLO_TTFT_HEADER } from '../../protocol/request-class.js';
import { respondTrailersOnly, trailersOnlyHeaders } from '../../protocol/grpc/respond.js';
import { CallError } from './call-error.js';
import { callClassOf } from './call-class.js';
import type { CallContext } from './call-context.js';
import { closeAfterFin, limitConnection, trackStream, type ConnectionLimitOptions } from './connection-limits.js';
import type { LocalService } from './local-service.js';
import { OpenCalls } from './open-calls.js';
import { ProxiedCall } from './proxied-call.js';
import { RAW_REQUEST_HEADERS, type RawHeaders } from './request-headers.js';
import { closeGoneStream, peekFirstMessage } from './request-peek.js';
import { STREAM_WINDOW_BYTES } from './upstream-session.js';

export interface IngressOptions extends ConnectionLimitOptions {
  readonly context: CallContext;
  /** Services answered by the sidecar itself, asked in order. */
  readonly services: readonly LocalService[];
  readonly isDraining: () => boolean;
  /** The priority of a call without x-request-priority. */
  readonly defaultPriority?: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised to every client connection. */
  readonly maxConcurrentStreams: number;
  /** HTTP/2 over TLS (ALPN h2 only, no HTTP/1.1), its certificate kept fresh; undefined: h2c. */
  readonly tls?: ServerTls | undefined;
}

export class Ingress {
  private readonly server: Http2Server | Http2SecureServer;
  private readonly sessions = new Set<Http2Session>();
  /** Every client socket (TLS: the TLS socket its session uses), so that close() can cut them all. */
  private readonly sockets = new Set<Socket>();
  /** Calls taken in and not yet finished with (answered in full, refused, cut or gone): what the drain waits for. */
  readonly openCalls = new OpenCalls();

  constructor(private readonly options: IngressOptions) {
    const serverOptions = {
      settings: { initialWindowSize: STREAM_WINDOW_BYTES, enablePush: false, maxConcurrentStreams: options.maxConcurrentStreams },
      maxSessionMemory: 256,
    };
    // With TLS the handshake gets the same bound as the HTTP/2 preface that follows it.
    if (options.tls) {
      const server = createSecureServer({ ...options.tls.serverOptions, ...serverOptions, handshakeTimeout: options.handshakeTimeoutMs });
      options.tls.serve(server);
      this.server = server;
    } else {
      this.server = createServer(serverOptions);
    }
    // node passes the raw header list as a fourth argument, which @types/node 20 does not declare.
    const onStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, rawHeaders: RawHeaders): void =>
      this.onStream(stream, headers, rawHeaders);
    this.server.on('stream', onStream as (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void);
    // Plain TCP for h2c; with TLS, the TLS socket (ending it ends the TCP one beneath).
    this.server.on(options.tls ? 'secureConnection' : 'connection', (socket: Socket) => {
      this.sockets.add(socket);
      closeAfterFin(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.server.on('session', (session) => {
      this.sessions.add(session);
      limitConnection(session, options);
      session.on('error', () => {}); // a broken client connection ends its streams; nothing else to do
      session.on('close', () => this.sessions.delete(session));
    });
  }

  /** Binds and resolves with the port actually bound (useful when asked for port 0). */
  listen(address: HostPort): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(address.port, address.host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders: RawHeaders): void {
    const { context, services } = this.options;
    const path = headers[':path'];
    trackStream(stream);

    for (const service of services) if (service.handles(path)) return service.serve(stream, headers);

    const contentType = headers['content-type'];
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      return this.refuse(stream, new CallError('invalid_request', `content-type must be application/grpc, got "${contentType ?? ''}"`));
    }

    if (this.options.isDraining()) {
      return this.refuse(stream, new CallError('draining', 'worker draining: not accepting new calls'));
    }

    let deadlineAt: number | undefined;
    const timeout = headers['grpc-timeout'];
    if (typeof timeout === 'string') {
      const ms = parseGrpcTimeout(timeout);
      if (ms === undefined) return this.refuse(stream, new CallError('invalid_request', `invalid grpc-timeout header "${timeout}"`));
      deadlineAt = context.clock.now() + ms;
    }

    const callClass = callClassOf(headers, this.options.defaultPriority ?? 0);
    if (callClass instanceof CallError) return this.refuse(stream, callClass);

    const call = new ProxiedCall(context, stream, headers, deadlineAt, this.openCalls, RAW_REQUEST_HEADERS ? rawHeaders : undefined, callClass);
    const work = context.work;
    if (!work?.wants(path)) return call.start();
    // The request's own TTFT SLO (what its frontend has left of it): tightens the sidecar's.
    const sloHeader = headers[SLO_TTFT_HEADER];
    const callSloMs = typeof sloHeader === 'string' ? parseSloTtft(sloHeader) : undefined;
    if (typeof callSloMs === 'object') return this.refuse(stream, new CallError('invalid_request', `${SLO_TTFT_HEADER} ${callSloMs.problem}`));
    // Admission by work: the first message first (its prompt and max_tokens), within the call's deadline.
    const peekMs = deadlineAt === undefined ? work.peekTimeoutMs : Math.max(1, Math.min(work.peekTimeoutMs, deadlineAt - context.clock.now()));
    peekFirstMessage(stream, work.maxMessageBytes, peekMs, context.clock, {
      message: (payload) => call.start(work.costOf(headers, payload), callSloMs),
      truncated: () => this.refuse(stream, new CallError('invalid_request', 'the request body ended before its first message was whole')),
      gone: () => {
        closeGoneStream(stream);
        context.metrics.callEnded(GrpcStatus.CANCELLED);
      },
    });
  }

  /** The drain grace period is over: every call still open ends with UNAVAILABLE (retryable elsewhere). */
  cutOpenCalls(): number {
    const calls = this.openCalls.list();
    // Queued calls first: cutting a call in the engine frees a slot, which would hand it to (and
    // dispatch) the next queued call during shutdown.
    for (const call of calls) if (call.phase === 'queued') call.shutdown();
    for (const call of calls) call.shutdown();
    return calls.length;
  }

  private refuse(stream: ServerHttp2Stream, error: CallError): void {
    stream.on('error', () => {});
    respondTrailersOnly(stream, trailersOnlyHeaders(error.status, error.message));
    this.options.context.metrics.callEnded(error.status);
  }

  /**
   * Stops accepting connections. Calls still open end with UNAVAILABLE (the drain grace period
   * is over by now), and so do the own services' watches; open sessions get GOAWAY and `graceMs`
   * to deliver those answers.
   */
  async close(graceMs = 1000): Promise<void> {
    this.options.tls?.close();
    this.cutOpenCalls();
    for (const service of this.options.services) service.close?.();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const session of this.sessions) session.close();
    // Past the grace, whatever is left goes, sockets included: a session that closed idle has
    // only end()ed its socket, which a client that never closes would otherwise keep.
    const timer = setTimeout(() => {
      for (const session of this.sessions) session.destroy();
      for (const socket of this.sockets) socket.destroy();
    }, graceMs);
    timer.unref();
    await closed;
    clearTimeout(timer);
  }
}
