/**
 * One proxied gRPC call, from ingress to its end. The call owns its admission permit and
 * releases it exactly once, on whichever exit comes first:
 *   trailers (or a Trailers-Only answer) handed to the client, the sidecar's own error answer,
 *   client cancel/reset, deadline, or the engine's connection failing.
 * A queued call that is cancelled or expires leaves the queue at once and is never sent upstream.
 *
 * Bytes are forwarded untouched in both directions; a write that the other side's HTTP/2 flow
 * control cannot take yet pauses the source until 'drain', so a client that stops reading stops
 * the engine's stream, and the other way round.
 *
 * This is the per-call hot path, so its stream listeners are module-level functions that find
 * their call through a symbol on the stream, instead of closures allocated for every call, and
 * forwarding is a plain data/write/drain loop rather than stream.pipe() and its listener set.
 */
import { constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Permit, QueueTicket } from '../admission/gate.js';
import { formatGrpcTimeout } from '../grpc/deadline.js';
import { respondTrailersOnly, statusTrailers, trailersOnlyHeaders } from '../grpc/respond.js';
import { GrpcStatus, parseStatus } from '../grpc/status.js';
import { CallError } from './call-error.js';
import type { CallContext, TrafficTap } from './call-context.js';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_FLAG_END_STREAM } = constants;

const CALL = Symbol('dynamo-sidecar.call');
type WithCall<S> = S & { [CALL]: ProxiedCall };
type Downstream = WithCall<ServerHttp2Stream>;
type Upstream = WithCall<ClientHttp2Stream>;

const RESPOND_AWAITING_TRAILERS = Object.freeze({ waitForTrailers: true });
const RESPOND_TRAILERS_ONLY = Object.freeze({ endStream: true });

type Phase = 'queued' | 'upstream' | 'ended';

export class ProxiedCall {
  private phase: Phase = 'queued';
  private permit: Permit | undefined;
  private ticket: QueueTicket | undefined;
  private upstream: Upstream | undefined;
  private upstreamSession: ClientHttp2Session | undefined;
  private timer: NodeJS.Timeout | undefined;
  private upstreamTrailers: IncomingHttpHeaders | undefined;
  /** Set when the sidecar ends a call whose response headers already went out. */
  private overrideTrailers: OutgoingHttpHeaders | undefined;
  private upstreamError: Error | undefined;
  private tap: TrafficTap | undefined;
  private readonly arrivedAt: number;
  private readonly downstream: Downstream;

  constructor(
    private readonly ctx: CallContext,
    downstream: ServerHttp2Stream,
    private readonly headers: IncomingHttpHeaders,
    /** Absolute deadline on ctx.now()'s clock, if the client sent grpc-timeout. */
    private readonly deadlineAt: number | undefined,
  ) {
    this.arrivedAt = ctx.now();
    this.downstream = downstream as Downstream;
    this.downstream[CALL] = this;
    downstream.on('error', ignore); // always followed by 'close', handled there
    downstream.on('close', onDownstreamClose);
  }

  /** Admission: a slot now, a place in the queue, or RESOURCE_EXHAUSTED. */
  start(): void {
    const admission = this.ctx.gate.acquire((permit) => this.onAdmitFromQueue(permit));
    if (admission.kind === 'admitted') {
      this.armDeadline();
      this.dispatch(admission.permit);
    } else if (admission.kind === 'queued') {
      this.ticket = admission.ticket;
      this.armDeadline();
    } else {
      this.ctx.metrics.rejected();
      this.ctx.observer?.rejected();
      respondTrailersOnly(this.downstream, this.ctx.rejectionResponse);
      this.endCall(GrpcStatus.RESOURCE_EXHAUSTED);
    }
  }

  private onAdmitFromQueue(permit: Permit): void {
    this.ticket = undefined;
    this.ctx.metrics.admittedFromQueue((this.ctx.now() - this.arrivedAt) / 1000);
    this.dispatch(permit);
  }

  private armDeadline(): void {
    if (this.deadlineAt === undefined) return;
    const delay = this.deadlineAt - this.ctx.now();
    if (delay <= 0) return void this.onDeadline();
    this.timer = setTimeout(() => this.onDeadline(), delay);
  }

  private onDeadline(): void {
    this.timer = undefined;
    if (this.phase === 'queued') {
      this.ticket?.cancel();
      this.ctx.metrics.deadlineWhileQueued();
      const waited = Math.round(this.ctx.now() - this.arrivedAt);
      this.answer(new CallError('deadline_exceeded', `Deadline exceeded while queued in the sidecar (waited ${waited} ms)`));
    } else if (this.phase === 'upstream') {
      this.fail(new CallError('deadline_exceeded', 'Deadline exceeded'));
    }
  }

  /** Upstream: forward headers, then bytes both ways. */
  private dispatch(permit: Permit): void {
    this.permit = permit;
    this.phase = 'upstream';
    const headers = this.headers;
    if (this.deadlineAt !== undefined) headers['grpc-timeout'] = formatGrpcTimeout(this.deadlineAt - this.ctx.now());
    let upstream: Upstream;
    try {
      upstream = this.ctx.upstream.request(headers) as Upstream;
    } catch (err) {
      this.ctx.metrics.upstreamError('connect');
      return this.fail(new CallError('upstream_unavailable', `${this.ctx.upstream.unreachableReason}: ${(err as Error).message}`, { cause: err }));
    }
    upstream[CALL] = this;
    this.upstream = upstream;
    this.upstreamSession = upstream.session as ClientHttp2Session | undefined;
    upstream.on('response', onUpstreamResponse);
    upstream.on('trailers', onUpstreamTrailers);
    upstream.on('error', onUpstreamError);
    upstream.on('close', onUpstreamClose);
    upstream.on('drain', onUpstreamDrain);
    this.tap = this.ctx.observer?.dispatched(headers);
    const downstream = this.downstream;
    downstream.on('data', onRequestData);
    downstream.on('end', onRequestEnd);
  }

  /** Client -> engine; the tap looks only after the bytes are on their way. */
  requestData(chunk: Buffer): void {
    const upstream = this.upstream!;
    if (!upstream.write(chunk)) this.downstream.pause();
    this.tap?.request(chunk);
  }

  requestEnd(): void {
    const upstream = this.upstream!;
    if (!upstream.destroyed) upstream.end();
  }

  /** Engine -> client. */
  responseData(chunk: Buffer): void {
    const downstream = this.downstream;
    if (!downstream.write(chunk)) this.upstream!.pause();
    this.tap?.response(chunk);
  }

  resumeUpstream(): void {
    this.upstream?.resume();
  }

  resumeDownstream(): void {
    this.downstream.resume();
  }

  onResponse(responseHeaders: IncomingHttpHeaders, flags: number): void {
    const downstream = this.downstream;
    if (this.phase !== 'upstream' || downstream.destroyed) return;
    if (flags & NGHTTP2_FLAG_END_STREAM) {
      // Trailers-Only from the engine: pass it on as Trailers-Only.
      downstream.respond(responseHeaders, RESPOND_TRAILERS_ONLY);
      return this.endCall(parseStatus(responseHeaders['grpc-status']));
    }
    downstream.respond(responseHeaders, RESPOND_AWAITING_TRAILERS);
    downstream.on('wantTrailers', onWantTrailers);
    downstream.on('drain', onDownstreamDrain);
    // The client's side is ended in onUpstreamClose, which knows whether the engine ended
    // with trailers or reset the stream (a reset upstream also emits 'end').
    this.upstream!.on('data', onResponseData);
  }

  setUpstreamTrailers(trailers: IncomingHttpHeaders): void {
    this.upstreamTrailers = trailers;
  }

  setUpstreamError(err: Error): void {
    this.upstreamError = err;
  }

  sendTrailers(): void {
    const trailers = this.overrideTrailers ?? this.upstreamTrailers!;
    if (!this.downstream.destroyed) this.downstream.sendTrailers(trailers);
    this.endCall(parseStatus(trailers['grpc-status'] as string | undefined));
  }

  onUpstreamClose(): void {
    if (this.phase !== 'upstream') return;
    const upstream = this.upstream!;
    const { downstream } = this;
    if (this.upstreamTrailers) {
      // Ended normally: the trailers go out once the client's side has drained ('wantTrailers').
      if (!downstream.writableEnded) downstream.end();
      return;
    }
    const session = this.upstreamSession;
    if (this.upstreamError || !session || session.destroyed || session.closed) {
      const neverConnected = !this.ctx.upstream.wasConnected(session);
      this.ctx.metrics.upstreamError(neverConnected ? 'connect' : 'session_lost');
      return this.fail(
        neverConnected
          ? new CallError('upstream_unavailable', this.ctx.upstream.unreachableReason, { cause: this.upstreamError })
          : new CallError('upstream_lost', `upstream ${this.ctx.upstream.address} connection lost during the call`, { cause: this.upstreamError }),
      );
    }
    // The engine reset the stream (node reports a reset after the request side ended as code 0):
    // pass the same reset on, so the client sees exactly what a direct caller would.
    const code = upstream.rstCode ?? NGHTTP2_NO_ERROR;
    this.ctx.metrics.upstreamError('reset');
    this.endCall(code === NGHTTP2_CANCEL ? GrpcStatus.CANCELLED : code === NGHTTP2_REFUSED_STREAM ? GrpcStatus.UNAVAILABLE : GrpcStatus.INTERNAL);
    if (!downstream.destroyed) downstream.close(code);
  }

  onDownstreamClose(): void {
    if (this.phase === 'ended') return;
    if (this.phase === 'queued') {
      if (this.ticket?.cancel()) this.ctx.metrics.cancelledWhileQueued();
    } else {
      this.upstream?.close(NGHTTP2_CANCEL);
    }
    this.endCall(GrpcStatus.CANCELLED);
  }

  /** The sidecar's own answer before any response header went out (reject, queue deadline). */
  private answer(error: CallError): void {
    respondTrailersOnly(this.downstream, trailersOnlyHeaders(error.status, error.message));
    this.endCall(error.status);
  }

  /** Ends a call that is in the engine: cancel upstream, free the slot, tell the client. */
  private fail(error: CallError): void {
    if (this.phase === 'ended') return;
    const upstream = this.upstream;
    if (upstream) {
      upstream.off('data', onResponseData);
      if (!upstream.destroyed) upstream.close(NGHTTP2_CANCEL);
    }
    if (!this.downstream.headersSent) return this.answer(error);
    // Response already started: end it with our status in the trailers.
    this.overrideTrailers = statusTrailers(error.status, error.message);
    this.endCall(error.status);
    if (!this.downstream.destroyed && !this.downstream.writableEnded) this.downstream.end();
  }

  /** The single exit: clears the timer, releases the slot once, records the outcome. */
  private endCall(status: number): void {
    if (this.phase === 'ended') return;
    this.phase = 'ended';
    clearTimeout(this.timer);
    this.permit?.release();
    this.tap?.end();
    this.ctx.metrics.callEnded(status);
  }
}

// Stream listeners, shared by every call; `this` is the stream that emitted the event.
function ignore(): void {}
function onDownstreamClose(this: Downstream): void {
  this[CALL].onDownstreamClose();
}
function onRequestData(this: Downstream, chunk: Buffer): void {
  this[CALL].requestData(chunk);
}
function onRequestEnd(this: Downstream): void {
  this[CALL].requestEnd();
}
function onDownstreamDrain(this: Downstream): void {
  this[CALL].resumeUpstream();
}
function onWantTrailers(this: Downstream): void {
  this[CALL].sendTrailers();
}
function onUpstreamResponse(this: Upstream, headers: IncomingHttpHeaders, flags: number): void {
  this[CALL].onResponse(headers, flags);
}
function onUpstreamTrailers(this: Upstream, trailers: IncomingHttpHeaders): void {
  this[CALL].setUpstreamTrailers(trailers);
}
function onUpstreamError(this: Upstream, err: Error): void {
  this[CALL].setUpstreamError(err);
}
function onUpstreamClose(this: Upstream): void {
  this[CALL].onUpstreamClose();
}
function onUpstreamDrain(this: Upstream): void {
  this[CALL].resumeDownstream();
}
function onResponseData(this: Upstream, chunk: Buffer): void {
  this[CALL].responseData(chunk);
}
