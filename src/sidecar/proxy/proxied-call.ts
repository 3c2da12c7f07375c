/**
 * One proxied gRPC call, from ingress to its end, as an explicit state machine.
 *
 *   queued ─admitted─► dispatching ─turn─► awaiting_response ─engine headers─► streaming ─engine done─► ending ─trailers─► ended
 *     │                                         │ Trailers-Only from the engine ─────────────────────────────────────────►│
 *     └── rejected, expired, cancelled, deadline, shutdown: the sidecar's own answer or a reset ────────────────────────►│
 *
 *   queued             waiting for an engine slot (holds a queue ticket); nothing sent upstream yet;
 *                      past the queue timeout it is refused like a full worker (RESOURCE_EXHAUSTED)
 *   dispatching        holds a slot; waits for its dispatch turn: at once, or, on a connection that
 *                      resets calls early, at the end of the current I/O read, so a reset that came
 *                      in the same read (Rapid Reset) is seen first and the engine never hears of it
 *   awaiting_response  holds a slot; request forwarded, no response headers yet
 *   streaming          holds a slot; response headers sent to the client, bytes flowing both ways
 *   ending             the engine is done (slot released); the client's side drains, then gets trailers
 *   ended              terminal: every later event is ignored
 *
 * Every event (client data/end/reset/close, engine response/data/trailers/reset/close/error,
 * flow-control drains, deadline, queue timeout, shutdown) is handled in every phase by a `switch` on the phase:
 * a transition, or an explicit ignore. Invariants, tested with fake streams and a fake clock:
 *   - the slot is released exactly once, on the first event that ends the engine's part of the call;
 *   - a call whose deadline has passed is never dispatched;
 *   - nothing is written to either stream after the call ended, and no write throws out of here:
 *     every write goes through one guard (`headersSent`, `closed`, `destroyed`, `writableEnded`),
 *     and an operation that still throws ends the call with INTERNAL instead of the process.
 *
 * Bytes are forwarded untouched in both directions; a write that the other side's HTTP/2 flow
 * control cannot take yet pauses the source until 'drain'. The stream listeners live in
 * call-listeners.ts, the write guard in stream-guard.ts.
 */
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { Permit, QueueTicket } from '../admission/gate.js';
import { MAX_FORWARDED_TIMEOUT_MS, MAX_TIMER_MS, formatGrpcTimeout } from '../../protocol/grpc/deadline.js';
import { statusTrailers, trailersOnlyHeaders } from '../../protocol/grpc/respond.js';
import { GrpcStatus, parseStatus } from '../../protocol/grpc/status.js';
import { CallError, overloadResponse } from './call-error.js';
import type { CallContext, DispatchTurn, DownstreamStream, TrafficTap, UpstreamStream } from './call-context.js';
import * as listeners from './call-listeners.js';
import { CALL, type CallEvents, type WithCall } from './call-listeners.js';
import { isEarlyReset, noteEarlyReset } from './connection-limits.js';
import { forwardableRawHeaders, isHeaderError, stripConnectionHeaders, type RawHeaders } from './request-headers.js';
import {
  guardedEnd,
  guardedReset,
  guardedRespond,
  guardedTrailers,
  guardedWrite,
  isWritable,
  type RespondOptions,
  type StreamFaultSink,
} from './stream-guard.js';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_FLAG_END_STREAM } = constants;

export type CallPhase = 'queued' | 'dispatching' | 'awaiting_response' | 'streaming' | 'ending' | 'ended';

/** What clients are told when the engine cannot be used; the engine's address goes to the logs only. */
export const ENGINE_UNAVAILABLE_MESSAGE = 'engine unavailable';
export const ENGINE_LOST_MESSAGE = 'engine connection lost during the call';
export const SHUTDOWN_MESSAGE = 'worker shutting down: call cut at the end of the drain grace period';

const RESPOND_AWAITING_TRAILERS = Object.freeze({ waitForTrailers: true });
const RESPOND_END_STREAM = Object.freeze({ endStream: true });

/** A call that the ingress can cut when the drain grace period ends. */
export interface OpenCall {
  readonly phase: CallPhase;
  shutdown(): void;
}

export class ProxiedCall implements OpenCall, DispatchTurn, StreamFaultSink, CallEvents {
  private state: CallPhase = 'queued';
  private permit: Permit | undefined;
  private ticket: QueueTicket | undefined;
  private upstream: UpstreamStream | undefined;
  private upstreamSession: unknown;
  private upstreamError: Error | undefined;
  private engineTrailers: IncomingHttpHeaders | undefined;
  /**
   * The engine has answered in full (trailers, or Trailers-Only): our request side is then ended
   * gracefully, never reset. A RST_STREAM per finished call would count against the engine's own
   * Rapid Reset limit (node's server sends GOAWAY(ENHANCE_YOUR_CALM)) and drop the shared session.
   */
  private engineDone = false;
  /** The trailers the client gets once its side has drained (the engine's, or the sidecar's own). */
  private finalTrailers: OutgoingHttpHeaders | undefined;
  private finalStatus: number = GrpcStatus.OK;
  private timer: unknown;
  /** The queue timeout, armed only while queued. */
  private queueTimer: unknown;
  /** When the slot was taken (ctx.clock), for the time calls hold a slot. */
  private slotSince = 0;
  private tap: TrafficTap | undefined;
  private readonly arrivedAt: number;
  private readonly downstream: WithCall<DownstreamStream>;

  constructor(
    private readonly ctx: CallContext,
    downstream: DownstreamStream,
    private readonly headers: IncomingHttpHeaders,
    /** Absolute deadline on ctx.clock's time, if the client sent grpc-timeout. */
    private readonly deadlineAt: number | undefined,
    /** Open calls, so that shutdown can cut them; the call leaves it when it ends. */
    private readonly openCalls?: Set<OpenCall>,
    /** The same headers as node's raw list, forwarded as such where node takes one (RAW_REQUEST_HEADERS). */
    private readonly rawHeaders?: RawHeaders,
  ) {
    this.arrivedAt = ctx.clock.now();
    this.downstream = downstream as WithCall<DownstreamStream>;
    this.downstream[CALL] = this;
    // Stream errors are always followed by 'close' (or come after 'aborted'); both are handled.
    downstream.on('error', listeners.ignore);
  }

  get phase(): CallPhase {
    return this.state;
  }

  /** Admission: refuse an expired call, else a slot now, a place in the queue, or RESOURCE_EXHAUSTED. */
  start(): void {
    if (this.deadlineAt !== undefined && this.deadlineAt <= this.arrivedAt) {
      return this.answer(new CallError('deadline_exceeded', 'Deadline exceeded before the call reached the engine'));
    }
    const admission = this.ctx.gate.acquire(this);
    if (admission.kind === 'rejected') {
      this.ctx.metrics.rejected('queue_full');
      this.ctx.observer?.rejected();
      this.terminate(GrpcStatus.RESOURCE_EXHAUSTED);
      this.respondDown(overloadResponse(this.ctx.retryPushbackMs()), RESPOND_END_STREAM);
      return this.discardRequest();
    }
    this.openCalls?.add(this);
    const downstream = this.downstream;
    downstream.on('close', listeners.onClientGone);
    downstream.on('aborted', listeners.onClientGone);
    this.armDeadline();
    if (admission.kind === 'admitted') {
      this.slotSince = this.arrivedAt;
      this.awaitDispatchTurn(admission.permit);
    } else {
      this.ticket = admission.ticket;
      this.armQueueTimeout();
    }
  }

  // ---- events ------------------------------------------------------------------------------

  /** A queued call reached a slot. */
  onAdmitted(permit: Permit): void {
    switch (this.state) {
      case 'queued': {
        this.ticket = undefined;
        this.clearQueueTimer();
        const now = this.ctx.clock.now();
        this.ctx.metrics.admittedFromQueue((now - this.arrivedAt) / 1000);
        this.slotSince = now;
        return this.awaitDispatchTurn(permit);
      }
      case 'dispatching':
      case 'awaiting_response':
      case 'streaming':
      case 'ending':
      case 'ended':
        // The ticket is cancelled whenever a call leaves the queue, so this cannot happen; a
        // permit nobody holds would strand a slot, so give it back.
        return permit.release();
    }
  }

  /** The end of the I/O read in which the call was admitted: send it to the engine now. */
  onDispatchTurn(): void {
    switch (this.state) {
      case 'dispatching':
        if (this.deadlineAt !== undefined && this.deadlineAt <= this.ctx.clock.now()) {
          // The deadline came before the turn (and before its timer ran): never dispatch.
          return this.onDeadline();
        }
        try {
          return this.dispatch();
        } catch (err) {
          return this.onStreamFault('dispatch', err);
        }
      case 'queued':
      case 'awaiting_response':
      case 'streaming':
      case 'ending':
      case 'ended':
        return;
    }
  }

  onDeadline(): void {
    this.timer = undefined;
    if (this.state === 'ended') return;
    const now = this.ctx.clock.now();
    if (this.deadlineAt !== undefined && now < this.deadlineAt) return this.armDeadline(); // a clamped long timer
    switch (this.state) {
      case 'queued': {
        this.ticket?.cancel();
        this.ticket = undefined;
        this.ctx.metrics.deadlineWhileQueued();
        const waited = Math.round(now - this.arrivedAt);
        return this.answer(new CallError('deadline_exceeded', `Deadline exceeded while queued in the sidecar (waited ${waited} ms)`));
      }
      case 'dispatching':
        return this.answer(new CallError('deadline_exceeded', 'Deadline exceeded before the call reached the engine'));
      case 'awaiting_response':
      case 'streaming':
        return this.fail(new CallError('deadline_exceeded', 'Deadline exceeded'));
      case 'ending':
        // The engine is done but the client has not taken the end of the answer in time.
        this.terminate(GrpcStatus.DEADLINE_EXCEEDED);
        return this.resetDown(NGHTTP2_CANCEL);
    }
  }

  /**
   * The call has waited the queue timeout without a slot: refused as a full worker is (the same
   * answer, pushback included), so the client retries here later or elsewhere. Armed only when
   * the call's own deadline comes later, so a shorter deadline answers DEADLINE_EXCEEDED instead.
   */
  onQueueTimeout(): void {
    this.queueTimer = undefined;
    switch (this.state) {
      case 'queued':
        this.ticket?.cancel();
        this.ticket = undefined;
        this.ctx.metrics.rejected('queue_timeout');
        this.ctx.observer?.rejected();
        this.terminate(GrpcStatus.RESOURCE_EXHAUSTED);
        this.respondDown(overloadResponse(this.ctx.retryPushbackMs()), RESPOND_END_STREAM);
        return this.discardRequest();
      case 'dispatching': // admitted in time: the timer was cleared, a late one changes nothing
      case 'awaiting_response':
      case 'streaming':
      case 'ending':
      case 'ended':
        return;
    }
  }

  /** The drain grace period is over: end the call with a status clients retry elsewhere. */
  shutdown(): void {
    switch (this.state) {
      case 'queued':
        this.ticket?.cancel();
        this.ticket = undefined;
        return this.answer(new CallError('shutting_down', SHUTDOWN_MESSAGE));
      case 'dispatching':
        return this.answer(new CallError('shutting_down', SHUTDOWN_MESSAGE));
      case 'awaiting_response':
      case 'streaming':
        return this.fail(new CallError('shutting_down', SHUTDOWN_MESSAGE));
      case 'ending': // the engine's answer is complete; the connection's own close delivers or cuts it
      case 'ended':
        return;
    }
  }

  /** Client -> engine bytes; the tap looks only after the bytes are on their way. */
  onClientData(chunk: Buffer): void {
    switch (this.state) {
      case 'awaiting_response':
      case 'streaming':
        if (!this.writeUp(chunk)) this.downstream.pause();
        this.tap?.request(chunk);
        return;
      case 'queued': // not read before dispatch: no 'data' listener until then
      case 'dispatching':
      case 'ending': // the engine has answered; the rest of the request is discarded
      case 'ended':
        return;
    }
  }

  onClientEnd(): void {
    switch (this.state) {
      case 'awaiting_response':
      case 'streaming':
        return this.endUp();
      case 'queued':
      case 'dispatching':
      case 'ending':
      case 'ended':
        return;
    }
  }

  /**
   * The client reset the stream ('aborted': our side was still open) or the stream closed. An
   * RST_STREAM(NO_ERROR) on a stream we are not reading never emits 'close', so 'aborted' is a
   * terminal event of its own: without it such a call would hold its slot forever.
   */
  onClientGone(): void {
    switch (this.state) {
      case 'queued':
        if (this.ticket?.cancel()) this.ctx.metrics.cancelledWhileQueued();
        this.ticket = undefined;
        this.noteIfEarlyReset();
        this.terminate(GrpcStatus.CANCELLED);
        return this.destroyDown();
      case 'dispatching':
      case 'awaiting_response':
        this.noteIfEarlyReset();
        this.terminate(GrpcStatus.CANCELLED); // also cancels the engine's stream, if any
        return this.destroyDown();
      case 'streaming':
      case 'ending':
        this.terminate(GrpcStatus.CANCELLED); // also cancels the engine's stream
        return this.destroyDown();
      case 'ended':
        return;
    }
  }

  onClientDrain(): void {
    switch (this.state) {
      case 'streaming':
        this.upstream?.resume();
        return;
      case 'queued':
      case 'dispatching':
      case 'awaiting_response':
      case 'ending':
      case 'ended':
        return;
    }
  }

  /** The client's side has drained after end(): the trailers go out now. */
  onClientWantTrailers(): void {
    switch (this.state) {
      case 'ending':
        this.terminate(this.finalStatus);
        return this.trailersDown(this.finalTrailers ?? statusTrailers(GrpcStatus.INTERNAL, 'missing trailers'));
      case 'queued':
      case 'dispatching':
      case 'awaiting_response':
      case 'streaming': // end() is only called on entering 'ending', so 'wantTrailers' cannot come earlier
      case 'ended':
        return;
    }
  }

  onEngineResponse(responseHeaders: IncomingHttpHeaders, flags: number): void {
    switch (this.state) {
      case 'awaiting_response':
        if (flags & NGHTTP2_FLAG_END_STREAM) {
          // Trailers-Only from the engine: pass it on as Trailers-Only (terminate also closes our
          // request side to the engine, which may still be open).
          if (this.downstream.headersSent || !isWritable(this.downstream)) return this.onClientGone();
          this.engineDone = true;
          this.endUp();
          this.terminate(parseStatus(responseHeaders['grpc-status']));
          this.respondDown(responseHeaders, RESPOND_END_STREAM);
          return this.discardRequest();
        }
        if (!this.respondDown(responseHeaders, RESPOND_AWAITING_TRAILERS)) return this.onClientGone();
        this.state = 'streaming';
        this.downstream.on('wantTrailers', listeners.onClientWantTrailers);
        this.downstream.on('drain', listeners.onClientDrain);
        this.upstream!.on('data', listeners.onEngineData);
        return;
      case 'queued':
      case 'dispatching':
      case 'streaming': // informational or repeated headers are not a new response
      case 'ending':
      case 'ended':
        return;
    }
  }

  /** Engine -> client bytes. */
  onEngineData(chunk: Buffer): void {
    switch (this.state) {
      case 'streaming':
        if (!this.writeDown(chunk)) this.upstream!.pause();
        this.tap?.response(chunk);
        return;
      case 'queued':
      case 'dispatching':
      case 'awaiting_response': // no 'data' listener before the response headers
      case 'ending':
      case 'ended':
        return;
    }
  }

  onEngineTrailers(trailers: IncomingHttpHeaders): void {
    switch (this.state) {
      case 'awaiting_response':
      case 'streaming':
        this.engineTrailers = trailers;
        return;
      case 'queued':
      case 'dispatching': // no engine stream yet
      case 'ending':
      case 'ended':
        return;
    }
  }

  onEngineError(err: Error): void {
    // Always followed by 'close' (or preceded by 'aborted'); remembered to tell a lost session from a reset.
    this.upstreamError ??= err;
  }

  onEngineDrain(): void {
    switch (this.state) {
      case 'awaiting_response':
      case 'streaming':
        this.downstream.resume();
        return;
      case 'queued':
      case 'dispatching': // no engine stream yet
      case 'ending':
      case 'ended':
        return;
    }
  }

  /** The engine reset the stream while our request side was open: final unless its trailers came first. */
  onEngineAborted(): void {
    if (this.engineTrailers) return; // complete answer; 'close' follows once its last bytes are read
    this.onEngineClosed();
  }

  /**
   * The engine's data has all been read. With its trailers in, the engine's part is over even
   * while the client is still sending (a bidi engine that answers first): node emits 'close' only
   * once our request side has ended too, so waiting for it would withhold the trailers and the slot.
   */
  onEngineEnd(): void {
    if (this.engineTrailers) this.onEngineClosed();
  }

  onEngineClosed(): void {
    switch (this.state) {
      case 'awaiting_response':
      case 'streaming':
        return this.afterEngineStream();
      case 'queued':
      case 'dispatching': // no engine stream yet
      case 'ending':
      case 'ended':
        return;
    }
  }

  // ---- transitions -------------------------------------------------------------------------

  /** A client reset before any answer, soon after sending the call, counts against its connection. */
  private noteIfEarlyReset(): void {
    if (isEarlyReset(this.arrivedAt, this.ctx.clock.now(), this.deadlineAt)) noteEarlyReset(this.downstream);
  }

  /** Holds the slot until the dispatch turn (see 'dispatching' above). */
  private awaitDispatchTurn(permit: Permit): void {
    this.permit = permit;
    this.state = 'dispatching';
    this.ctx.scheduleDispatch(this, this.downstream);
  }

  private dispatch(): void {
    const timeout = this.deadlineAt === undefined ? undefined : formatGrpcTimeout(Math.min(MAX_FORWARDED_TIMEOUT_MS, this.deadlineAt - this.ctx.clock.now()));
    let headers: OutgoingHttpHeaders | RawHeaders;
    if (this.rawHeaders) headers = forwardableRawHeaders(this.rawHeaders, timeout);
    else {
      headers = stripConnectionHeaders(this.headers);
      if (timeout !== undefined) headers['grpc-timeout'] = timeout;
    }
    if (this.ctx.upstream.down) {
      this.ctx.metrics.upstreamError('connect');
      return this.answer(new CallError('upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE));
    }
    let upstream: WithCall<UpstreamStream>;
    try {
      upstream = this.ctx.upstream.request(headers) as WithCall<UpstreamStream>;
    } catch (err) {
      if (isHeaderError(err)) {
        return this.answer(new CallError('invalid_request', `request headers cannot be forwarded: ${(err as Error).message}`));
      }
      this.ctx.metrics.upstreamError('connect');
      this.ctx.logger.debug('call not dispatched: engine stream could not be opened', { error: (err as Error).message });
      return this.answer(new CallError('upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE, { cause: err }));
    }
    this.state = 'awaiting_response';
    upstream[CALL] = this;
    this.upstream = upstream;
    this.upstreamSession = upstream.session;
    upstream.on('response', listeners.onEngineResponse);
    upstream.on('trailers', listeners.onEngineTrailers);
    upstream.on('error', listeners.onEngineError);
    upstream.on('aborted', listeners.onEngineAborted);
    upstream.on('close', listeners.onEngineClose);
    upstream.on('end', listeners.onEngineEnd);
    upstream.on('drain', listeners.onEngineDrain);
    this.tap = this.ctx.observer?.dispatched(this.headers);
    const downstream = this.downstream;
    downstream.on('data', listeners.onClientData);
    downstream.on('end', listeners.onClientEnd);
  }

  /** The engine's stream is over: its trailers, a reset, or the connection failing. */
  private afterEngineStream(): void {
    const upstream = this.upstream!;
    if (this.engineTrailers) {
      this.finalStatus = parseStatus(this.engineTrailers['grpc-status']);
      this.engineDone = true;
      this.endUp(); // our request side, if the client is still sending: the engine has answered
      return this.beginEnding(this.engineTrailers);
    }
    const session = this.upstreamSession as { destroyed?: boolean; closed?: boolean } | undefined;
    // A reset with an error code also arrives as the stream's ERR_HTTP2_STREAM_ERROR: that is the
    // engine's answer on a live connection, not a lost one.
    const engineReset = (this.upstreamError as { code?: unknown } | undefined)?.code === 'ERR_HTTP2_STREAM_ERROR';
    if ((this.upstreamError && !engineReset) || !session || session.destroyed || session.closed) {
      const neverConnected = !this.ctx.upstream.wasConnected(session);
      this.ctx.metrics.upstreamError(neverConnected ? 'connect' : 'session_lost');
      return this.fail(
        neverConnected
          ? new CallError('upstream_unavailable', ENGINE_UNAVAILABLE_MESSAGE, { cause: this.upstreamError })
          : new CallError('upstream_lost', ENGINE_LOST_MESSAGE, { cause: this.upstreamError }),
      );
    }
    // The engine reset the stream (node reports a reset after the request side ended as code 0):
    // pass the same reset on, so the client sees exactly what a direct caller would.
    const code = upstream.rstCode ?? NGHTTP2_NO_ERROR;
    this.ctx.metrics.upstreamError('reset');
    this.terminate(code === NGHTTP2_CANCEL ? GrpcStatus.CANCELLED : code === NGHTTP2_REFUSED_STREAM ? GrpcStatus.UNAVAILABLE : GrpcStatus.INTERNAL);
    this.resetDown(code);
  }

  /**
   * The engine's part is over: free the slot, cancel the engine's stream if it is still working
   * (not when it answered in full), end the client's side, and send `trailers` once it has drained.
   */
  private beginEnding(trailers: OutgoingHttpHeaders): void {
    this.state = 'ending';
    this.finalTrailers = trailers;
    this.resetUp(NGHTTP2_CANCEL); // before the slot, as in terminate()
    this.releaseSlot();
    if (!this.endDown()) this.terminate(GrpcStatus.CANCELLED);
  }

  /** The sidecar's own answer before any response header went out (reject, deadline, no engine). */
  private answer(error: CallError): void {
    this.terminate(error.status);
    this.respondDown(trailersOnlyHeaders(error.status, error.message), RESPOND_END_STREAM);
    this.discardRequest();
  }

  /** Ends a call that is in the engine: cancel upstream, free the slot, tell the client. */
  private fail(error: CallError): void {
    if (!this.downstream.headersSent) return this.answer(error);
    // The response has started: end it with the sidecar's status in the trailers.
    this.finalStatus = error.status;
    this.beginEnding(statusTrailers(error.status, error.message));
  }

  private armDeadline(): void {
    if (this.deadlineAt === undefined) return;
    // Node's timers overflow past 2^31-1 ms (about 24.8 days) and would fire at once; a longer
    // deadline is timed in steps of the maximum instead.
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, this.deadlineAt - this.ctx.clock.now()));
    this.timer = this.ctx.clock.setTimer(listeners.onDeadline.bind(this), delay);
  }

  /** Queue timeout of the context (0 or unset: none), unless the call's deadline comes first. */
  private armQueueTimeout(): void {
    const ms = this.ctx.queueTimeoutMs;
    if (!ms || (this.deadlineAt !== undefined && this.deadlineAt <= this.arrivedAt + ms)) return;
    this.queueTimer = this.ctx.clock.setTimer(listeners.onQueueTimeout.bind(this), ms);
  }

  private clearQueueTimer(): void {
    if (this.queueTimer !== undefined) this.ctx.clock.clearTimer(this.queueTimer);
    this.queueTimer = undefined;
  }

  private releaseSlot(): void {
    const permit = this.permit;
    if (!permit) return;
    this.permit = undefined;
    permit.release();
    const tap = this.tap;
    this.tap = undefined;
    tap?.end();
    this.ctx.observer?.slotReleased?.(this.ctx.clock.now() - this.slotSince);
  }

  /**
   * The single exit: clears the timer, releases the slot once, cancels the engine's stream if it
   * is still open, records the outcome. Callers end the call here first and only then touch the
   * client's stream, since stream operations can emit events synchronously ('aborted' from
   * close()), and those must find the call already ended.
   */
  private terminate(status: number): void {
    if (this.state === 'ended') return;
    this.state = 'ended';
    if (this.timer !== undefined) this.ctx.clock.clearTimer(this.timer);
    this.timer = undefined;
    this.clearQueueTimer();
    // The engine's stream goes before the slot: a freed slot dispatches the next queued call at
    // once, and its HEADERS must not reach the engine ahead of this call's RST_STREAM (N+1).
    // (An engine that answered in full gets no RST_STREAM: see engineDone.)
    this.resetUp(NGHTTP2_CANCEL);
    this.releaseSlot();
    this.openCalls?.delete(this);
    this.ctx.metrics.callEnded(status);
  }

  // ---- stream operations, all through the guard (stream-guard.ts) -------------------------------

  /** A stream operation threw although its guard allowed it: end the call with INTERNAL, not the process. */
  onStreamFault(operation: string, err: unknown): void {
    this.ctx.logger.warn('stream operation failed; call ended', { operation, error: (err as Error)?.message });
    this.terminate(GrpcStatus.INTERNAL);
    this.destroyDown();
  }

  private respondDown(headers: OutgoingHttpHeaders, options: RespondOptions): boolean {
    return guardedRespond(this.downstream, headers, options, this);
  }

  /** False when the client's flow-control window is full (pause the engine until 'drain'). */
  private writeDown(chunk: Buffer): boolean {
    return guardedWrite(this.downstream, chunk, this);
  }

  private endDown(): boolean {
    return guardedEnd(this.downstream, this);
  }

  private trailersDown(trailers: OutgoingHttpHeaders): void {
    guardedTrailers(this.downstream, trailers, this);
  }

  private resetDown(code: number): void {
    guardedReset(this.downstream, code, this);
  }

  private destroyDown(): void {
    if (!this.downstream.destroyed) this.downstream.destroy();
  }

  /** After the sidecar's own answer: read and drop whatever request body is still coming. */
  private discardRequest(): void {
    if (!this.downstream.destroyed) this.downstream.resume();
  }

  /** False when the engine's flow-control window is full (pause the client until 'drain'). */
  private writeUp(chunk: Buffer): boolean {
    return this.upstream ? guardedWrite(this.upstream, chunk, this) : true;
  }

  private endUp(): void {
    if (this.upstream) guardedEnd(this.upstream, this);
  }

  /** Cancels the engine's stream unless the engine has answered in full; a failure to do so has nothing left to end (no fault). */
  private resetUp(code: number): void {
    if (this.upstream && !this.engineDone) guardedReset(this.upstream, code, IGNORE_FAULT);
  }
}

const IGNORE_FAULT: StreamFaultSink = { onStreamFault() {} };
