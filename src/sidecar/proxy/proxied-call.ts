/**
 * One proxied gRPC call, from ingress to its end: what each event does. Its phases, and the two
 * tables that say where an event acts and which phase may follow which, are in call-phases.ts.
 * Invariants, tested with fake streams and a fake clock: the slot is released exactly once, on the
 * first event that ends the engine's part of the call; a call whose deadline has passed is never
 * dispatched; nothing is written to either stream after the call ended, and no write throws out of
 * here (every write goes through stream-guard.ts; one that throws all the same ends the call with
 * INTERNAL, not the process). Bytes are forwarded untouched both ways; a write the other side's
 * flow control cannot take yet pauses the source until 'drain'.
 */
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import type { Permit, QueueTicket } from '../admission/gate.js';
import { DEFAULT_CALL_CLASS, type CallClass } from '../admission/waiting-room.js';
import { statusTrailers, trailersOnlyHeaders } from '../../protocol/grpc/respond.js';
import { GrpcStatus, parseStatus } from '../../protocol/grpc/status.js';
import type { RejectionReason } from '../metrics/sidecar-metrics.js';
import { CallError, DEADLINE_BEFORE_ENGINE, SHUTDOWN_MESSAGE, overloadResponse } from './call-error.js';
import type { CallContext, DispatchTurn, DownstreamStream } from './call-context.js';
import { CALL, ignore, listenForClientGone, listenToEngineAndClientBody, listenToResponseBody, type CallEvents, type WithCall } from './call-listeners.js';
import { CallTimers } from './call-timers.js';
import { SlotLease } from './slot-lease.js';
import { BEFORE_RESPONSE, actsIn, isTransition, type CallEvent, type CallPhase, type OpenCall } from './call-phases.js';
import type { OpenCalls } from './open-calls.js';
import { isEarlyReset, noteEarlyReset } from './connection-limits.js';
import { EngineLeg, openEngineLeg } from './engine-leg.js';
import { upstreamRequestHeaders, type RawHeaders } from './request-headers.js';
import { destroyStream, guardedEnd, guardedReset, guardedRespond, guardedTrailers, guardedWrite, isWritable, type StreamFaultSink } from './stream-guard.js';

const { NGHTTP2_CANCEL, NGHTTP2_FLAG_END_STREAM } = constants;
const RESPOND_AWAITING_TRAILERS = Object.freeze({ waitForTrailers: true });
const RESPOND_END_STREAM = Object.freeze({ endStream: true });

export class ProxiedCall implements OpenCall, DispatchTurn, StreamFaultSink, CallEvents {
  private state: CallPhase = 'queued';
  /** The engine slot, from admission until the engine's part ends. */
  private slot: SlotLease | undefined;
  private ticket: QueueTicket | undefined;
  /** The engine's side, from dispatch on. */
  private engine: EngineLeg | undefined;
  /** The trailers the client gets once its side has drained (the engine's, or the sidecar's own). */
  private finalTrailers: OutgoingHttpHeaders | undefined;
  private finalStatus: number = GrpcStatus.OK;
  private readonly arrivedAt: number;
  private readonly downstream: WithCall<DownstreamStream>;
  private readonly timers: CallTimers;

  constructor(
    private readonly ctx: CallContext,
    downstream: DownstreamStream,
    private readonly headers: IncomingHttpHeaders,
    /** Absolute deadline on ctx.clock's time, if the client sent grpc-timeout. */
    private readonly deadlineAt: number | undefined,
    /** Open calls, so that shutdown can cut them; the call leaves it when it ends. */
    private readonly openCalls?: OpenCalls,
    /** The same headers as node's raw list, forwarded as such where node takes one (RAW_REQUEST_HEADERS). */
    private readonly rawHeaders?: RawHeaders,
    /** Its priority and tenant (call-class.ts): where it queues, and what it may displace. */
    private readonly callClass: CallClass = DEFAULT_CALL_CLASS,
  ) {
    this.arrivedAt = ctx.clock.now();
    this.timers = new CallTimers(ctx.clock, this);
    this.downstream = downstream as WithCall<DownstreamStream>;
    this.downstream[CALL] = this;
    downstream.on('error', ignore); // always followed by 'close' (or after 'aborted'): both are handled
  }

  get phase(): CallPhase {
    return this.state;
  }

  /**
   * Admission: refuse an expired call; with a cost (--ttft-slo-ms), refuse one whose predicted
   * TTFT cannot meet its SLO (the sidecar's, or the call's own `callSloMs` when nearer); else a slot now, a place in the queue, or RESOURCE_EXHAUSTED (full,
   * or the wait too long).
   */
  start(cost?: unknown, callSloMs?: number): void {
    if (this.deadlineAt !== undefined && this.deadlineAt <= this.arrivedAt) return this.answer(new CallError('deadline_exceeded', DEADLINE_BEFORE_ENGINE));
    const deadlineLeftMs = this.deadlineAt === undefined ? undefined : this.deadlineAt - this.arrivedAt;
    let queueBudgetMs: number | undefined;
    if (cost !== undefined && this.ctx.work) {
      // Judged against the nearer of its deadline and its own SLO (x-slo-ttft-ms), within the sidecar's SLO.
      const verdict = this.ctx.work.judge(cost, Math.min(deadlineLeftMs ?? Infinity, callSloMs ?? Infinity));
      if (verdict.kind === 'refuse') return this.reject(verdict.reason, verdict.pushbackMs);
      queueBudgetMs = verdict.queueBudgetMs;
    }
    const waitMs = this.ctx.gate.hasRoomFor(cost) ? undefined : this.ctx.queueRefusalMs?.(deadlineLeftMs, this.callClass);
    if (waitMs !== undefined) return this.reject('expected_wait', waitMs); // too long a wait to queue for
    const admission = this.ctx.gate.acquire(this, this.callClass, cost);
    if (admission.kind === 'rejected') return this.reject('queue_full');
    this.openCalls?.add(this);
    listenForClientGone(this.downstream);
    if (this.deadlineAt !== undefined) this.timers.armDeadline(this.deadlineAt);
    if (admission.kind === 'admitted') return this.awaitDispatchTurn(admission.permit, this.arrivedAt);
    this.ticket = admission.ticket;
    // Queued no longer than its SLO leaves (a call that could no longer make it goes elsewhere), nor than the queue timeout.
    const timeoutMs = Math.min(this.ctx.queueTimeoutMs || Infinity, queueBudgetMs ?? Infinity);
    this.timers.armQueueTimeout(Number.isFinite(timeoutMs) ? timeoutMs : 0, this.arrivedAt, this.deadlineAt);
  }

  // ---- events ------------------------------------------------------------------------------

  /** A queued call reached a slot. */
  onAdmitted(permit: Permit): void {
    if (!this.actsOn('onAdmitted')) return permit.release(); // a permit nobody holds would strand a slot
    this.ticket = undefined;
    this.timers.clearQueueTimeout();
    const now = this.ctx.clock.now();
    this.ctx.metrics.admittedFromQueue((now - this.arrivedAt) / 1000);
    this.awaitDispatchTurn(permit, now);
  }

  /** The end of the I/O read in which the call was admitted: send it to the engine now. */
  onDispatchTurn(): void {
    if (!this.actsOn('onDispatchTurn')) return;
    // The deadline came before the turn (and before its timer ran): never dispatch.
    if (this.deadlineAt !== undefined && this.deadlineAt <= this.ctx.clock.now()) return this.onDeadline();
    try {
      this.dispatch();
    } catch (err) {
      this.onStreamFault('dispatch', err);
    }
  }

  /** A more urgent call (or a tenant with fewer places) took this one's place in the full queue: refused as a full worker is. */
  onDisplaced(): void {
    if (!this.actsOn('onDisplaced')) return;
    this.ticket = undefined; // void already: the gate took it out
    this.reject('displaced');
  }

  onDeadline(): void {
    if (!this.actsOn('onDeadline')) return;
    const now = this.ctx.clock.now();
    if (this.deadlineAt !== undefined && now < this.deadlineAt) return this.timers.armDeadline(this.deadlineAt); // a step of a long deadline
    switch (this.state) {
      case 'queued':
        this.leaveQueue();
        this.ctx.metrics.deadlineWhileQueued();
        return this.answer(new CallError('deadline_exceeded', `Deadline exceeded while queued in the sidecar (waited ${Math.round(now - this.arrivedAt)} ms)`));
      case 'dispatching':
        return this.answer(new CallError('deadline_exceeded', DEADLINE_BEFORE_ENGINE));
      case 'ending': // the engine is done, but the client has not taken the end of the answer in time
        this.terminate(GrpcStatus.DEADLINE_EXCEEDED);
        return guardedReset(this.downstream, NGHTTP2_CANCEL, this);
      default:
        return this.fail(new CallError('deadline_exceeded', 'Deadline exceeded'));
    }
  }

  // Queued the queue timeout long: refused as a full worker is, pushback included, so the client retries
  // here later or elsewhere. Armed only when the call's own deadline comes later (else DEADLINE_EXCEEDED).
  onQueueTimeout(): void {
    if (!this.actsOn('onQueueTimeout')) return;
    this.leaveQueue();
    this.reject('queue_timeout');
  }

  /** The drain grace period is over: end the call with a status clients retry elsewhere. */
  shutdown(): void {
    if (!this.actsOn('shutdown')) return;
    this.leaveQueue();
    this.fail(new CallError('shutting_down', SHUTDOWN_MESSAGE));
  }

  /** Client -> engine bytes; the tap looks only after the bytes are on their way. */
  onClientData(chunk: Buffer): void {
    if (!this.actsOn('onClientData')) return;
    if (!this.engine!.write(chunk, this)) this.downstream.pause();
    this.slot!.tap?.request(chunk);
  }

  onClientEnd(): void {
    if (this.actsOn('onClientEnd')) this.engine!.end(this);
  }

  /**
   * The client reset the stream ('aborted': our side was still open) or the stream closed. An
   * RST_STREAM(NO_ERROR) on a stream we are not reading never emits 'close', so 'aborted' is a
   * terminal event of its own: without it such a call would hold its slot forever.
   */
  onClientGone(): void {
    if (!this.actsOn('onClientGone')) return;
    if (this.leaveQueue()) this.ctx.metrics.cancelledWhileQueued();
    // A client reset before any answer, soon after sending the call, counts against its connection.
    if (BEFORE_RESPONSE.includes(this.state) && isEarlyReset(this.arrivedAt, this.ctx.clock.now(), this.deadlineAt)) noteEarlyReset(this.downstream);
    this.terminate(GrpcStatus.CANCELLED); // also cancels the engine's stream, if any
    destroyStream(this.downstream);
  }

  onClientDrain(): void {
    if (this.actsOn('onClientDrain')) this.engine!.stream.resume();
  }

  /** The client's side has drained after end(): the trailers go out now. */
  onClientWantTrailers(): void {
    if (!this.actsOn('onClientWantTrailers')) return;
    this.terminate(this.finalStatus);
    guardedTrailers(this.downstream, this.finalTrailers ?? statusTrailers(GrpcStatus.INTERNAL, 'missing trailers'), this);
  }

  onEngineResponse(responseHeaders: IncomingHttpHeaders, flags: number): void {
    if (!this.actsOn('onEngineResponse')) return;
    if (flags & NGHTTP2_FLAG_END_STREAM) {
      // Trailers-Only from the engine: pass it on as Trailers-Only (terminate also closes our
      // request side to the engine, which may still be open).
      if (this.downstream.headersSent || !isWritable(this.downstream)) return this.onClientGone();
      this.engine!.answered(this);
      return this.endWith(parseStatus(responseHeaders['grpc-status']), responseHeaders);
    }
    if (!guardedRespond(this.downstream, responseHeaders, RESPOND_AWAITING_TRAILERS, this)) return this.onClientGone();
    this.transition('streaming');
    listenToResponseBody(this.engine!.stream, this.downstream);
  }

  /** Engine -> client bytes. */
  onEngineData(chunk: Buffer): void {
    if (!this.actsOn('onEngineData')) return;
    if (!guardedWrite(this.downstream, chunk, this)) this.engine!.stream.pause();
    this.slot!.firstToken(this.ctx.clock.now(), this.ctx.observer); // a no-op after the first chunk
    this.slot!.tap?.response(chunk);
  }

  onEngineTrailers(trailers: IncomingHttpHeaders): void {
    if (this.actsOn('onEngineTrailers')) this.engine!.trailers = trailers;
  }

  onEngineError(err: Error): void {
    if (this.actsOn('onEngineError')) this.engine!.noteError(err);
  }

  onEngineDrain(): void {
    if (this.actsOn('onEngineDrain')) this.downstream.resume();
  }

  /** The engine reset the stream while our request side was open: final unless its trailers came first ('close' follows them). */
  onEngineAborted(): void {
    if (this.actsOn('onEngineAborted') && !this.engine!.trailers) this.afterEngineStream();
  }

  /**
   * The engine's data has all been read. With its trailers in, the engine's part is over even
   * while the client is still sending (a bidi engine that answers first): node emits 'close' only
   * once our request side has ended too, so waiting for it would withhold the trailers and the slot.
   */
  onEngineEnd(): void {
    if (this.actsOn('onEngineEnd') && this.engine!.trailers) this.afterEngineStream();
  }

  onEngineClosed(): void {
    if (this.actsOn('onEngineClosed')) this.afterEngineStream();
  }

  // ---- transitions -------------------------------------------------------------------------

  private actsOn(event: CallEvent): boolean {
    return actsIn(event, this.state);
  }

  /** The one place the phase changes; false (and no change) for a change NEXT_PHASES does not list. */
  private transition(to: CallPhase): boolean {
    if (!isTransition(this.state, to)) return false;
    this.state = to;
    return true;
  }

  /** Gives up the place in the queue, if the call holds one; true when it did. */
  private leaveQueue(): boolean {
    const ticket = this.ticket;
    this.ticket = undefined;
    return ticket?.cancel() ?? false;
  }

  /** Holds the slot until the dispatch turn (see 'dispatching' above). */
  private awaitDispatchTurn(permit: Permit, now: number): void {
    this.slot = new SlotLease(permit, now);
    this.ctx.metrics.classAdmitted(this.callClass);
    this.transition('dispatching');
    this.ctx.scheduleDispatch(this, this.downstream);
  }

  private dispatch(): void {
    const timeLeftMs = this.deadlineAt === undefined ? undefined : this.deadlineAt - this.ctx.clock.now();
    const opened = openEngineLeg(this.ctx.upstream, upstreamRequestHeaders(this.headers, this.rawHeaders, timeLeftMs), this, this.ctx.logger);
    if (opened instanceof CallError) {
      if (opened.kind === 'upstream_unavailable') this.ctx.metrics.upstreamError('connect');
      return this.answer(opened);
    }
    this.transition('awaiting_response');
    this.engine = opened;
    this.slot!.tap = this.ctx.observer?.dispatched(this.headers);
    listenToEngineAndClientBody(opened.stream, this.downstream);
  }

  /** The engine's stream is over: its trailers, a reset, or the connection failing. */
  private afterEngineStream(): void {
    const engine = this.engine!;
    if (engine.trailers) {
      this.finalStatus = parseStatus(engine.trailers['grpc-status']);
      engine.answered(this); // ends our request side, if the client is still sending
      return this.beginEnding(engine.trailers);
    }
    const outcome = engine.outcome(this.ctx.upstream);
    if (outcome.kind === 'failed') {
      this.ctx.metrics.upstreamError(outcome.metric);
      return this.fail(outcome.error);
    }
    // Pass the engine's reset on as it is, so the client sees exactly what a direct caller would.
    this.ctx.metrics.upstreamError('reset');
    this.terminate(outcome.status);
    guardedReset(this.downstream, outcome.code, this);
  }

  /**
   * The engine's part is over: free the slot, cancel the engine's stream if it is still working
   * (not when it answered in full), end the client's side, and send `trailers` once it has drained.
   */
  private beginEnding(trailers: OutgoingHttpHeaders): void {
    this.transition('ending');
    this.finalTrailers = trailers;
    this.engine?.cancel(); // before the slot, as in terminate()
    this.slot?.release(this.ctx.clock.now(), this.ctx.observer);
    if (!guardedEnd(this.downstream, this)) this.terminate(GrpcStatus.CANCELLED);
  }

  /** Refused like a full worker: RESOURCE_EXHAUSTED with the retry pushback (or the given one), Trailers-Only. */
  private reject(reason: RejectionReason, pushbackMs = this.ctx.retryPushbackMs()): void {
    this.ctx.metrics.rejected(reason, this.callClass);
    this.ctx.observer?.rejected(reason, this.callClass);
    this.endWith(GrpcStatus.RESOURCE_EXHAUSTED, overloadResponse(pushbackMs));
  }

  /** The sidecar's own answer before any response header went out (deadline, no engine, shutdown). */
  private answer(error: CallError): void {
    this.endWith(error.status, trailersOnlyHeaders(error.status, error.message));
  }

  /** Ends the call, answers Trailers-Only with `headers`, then reads and drops whatever request body is still coming. */
  private endWith(status: number, headers: OutgoingHttpHeaders): void {
    this.terminate(status);
    guardedRespond(this.downstream, headers, RESPOND_END_STREAM, this);
    if (!this.downstream.destroyed) this.downstream.resume();
  }

  /** Ends a call with the sidecar's status: Trailers-Only before the response started, else in the trailers. */
  private fail(error: CallError): void {
    if (!this.downstream.headersSent) return this.answer(error);
    this.finalStatus = error.status;
    this.beginEnding(statusTrailers(error.status, error.message));
  }

  /**
   * The single exit: clears the timers, releases the slot once, cancels the engine's stream if it
   * is still open, records the outcome. Callers end the call here first and only then touch the
   * client's stream, since stream operations can emit events synchronously ('aborted' from
   * close()), and those must find the call already ended.
   */
  private terminate(status: number): void {
    if (!this.transition('ended')) return;
    this.timers.clearAll();
    // The engine's stream goes before the slot: a freed slot dispatches the next queued call at
    // once, and its HEADERS must not reach the engine ahead of this call's RST_STREAM (N+1).
    this.engine?.cancel();
    this.slot?.release(this.ctx.clock.now(), this.ctx.observer);
    this.openCalls?.delete(this);
    this.ctx.metrics.callEnded(status);
  }

  /** A stream operation threw although its guard allowed it: end the call with INTERNAL, not the process. */
  onStreamFault(operation: string, err: unknown): void {
    this.ctx.logger.warn('stream operation failed; call ended', { operation, error: (err as Error)?.message });
    this.terminate(GrpcStatus.INTERNAL);
    destroyStream(this.downstream);
  }
}
