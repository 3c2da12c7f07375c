/**
 * ProxiedCall, the call's state machine, driven with fake streams and a fake clock: every event in
 * every phase (table), the deadline and header rules, and seeded random event sequences checking
 * the invariants (slot released exactly once, nothing written after the end, no throw).
 */
import type { CallClass } from '../../../../src/sidecar/admission/waiting-room.js';
import { constants, type IncomingHttpHeaders } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { AdmissionGate, type Admission, type OnAdmit, type Permit, type QueueTicket } from '../../../../src/sidecar/admission/gate.js';
import { mulberry32 } from '../../../../src/platform/prng.js';
import { MAX_TIMER_MS } from '../../../../src/protocol/grpc/deadline.js';
import { GrpcStatus } from '../../../../src/protocol/grpc/status.js';
import { silentLogger } from '../../../../src/platform/log.js';
import type { CallContext, CallMetrics, CallObserver, DispatchTurn } from '../../../../src/sidecar/proxy/call-context.js';
import { ENGINE_UNAVAILABLE_MESSAGE } from '../../../../src/sidecar/proxy/engine-outcome.js';
import { NEXT_PHASES, type CallPhase } from '../../../../src/sidecar/proxy/call-phases.js';
import { OpenCalls } from '../../../../src/sidecar/proxy/open-calls.js';
import { ProxiedCall } from '../../../../src/sidecar/proxy/proxied-call.js';
import { FakeConnector, FakeDownstream, errorWithCode, fakeClock, type FakeUpstream } from '../../../support/fake-call-streams.js';
import { admitting } from '../../../support/admitting.js';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_FLAG_END_STREAM } = constants;
const DEADLINE_MS = 1000;

class RecordingMetrics implements CallMetrics {
  readonly ended: number[] = [];
  readonly events: string[] = [];
  readonly admittedClasses: CallClass[] = [];
  readonly rejectedClasses: (CallClass | undefined)[] = [];
  classAdmitted(callClass: CallClass): void {
    this.admittedClasses.push(callClass);
  }
  rejected(reason: string, callClass?: CallClass): void {
    this.rejectedClasses.push(callClass);
    this.events.push(reason === 'queue_full' ? 'rejected' : `rejected ${reason}`);
  }
  admittedFromQueue(): void {
    this.events.push('admittedFromQueue');
  }
  cancelledWhileQueued(): void {
    this.events.push('cancelledWhileQueued');
  }
  deadlineWhileQueued(): void {
    this.events.push('deadlineWhileQueued');
  }
  upstreamError(kind: string): void {
    this.events.push(`upstreamError ${kind}`);
  }
  callEnded(status: number): void {
    this.ended.push(status);
  }
}

interface Harness {
  readonly call: ProxiedCall;
  readonly down: FakeDownstream;
  readonly connector: FakeConnector;
  readonly gate: AdmissionGate;
  readonly metrics: RecordingMetrics;
  readonly clock: ReturnType<typeof fakeClock>;
  readonly openCalls: OpenCalls;
  /** Release calls on the permits this call was given. */
  releases(): number;
  /** What had been done to the engine stream when the slot was released. */
  engineOpsAtRelease(): string[] | undefined;
  /** A permit held by another call, so that this one queues; release it to admit this one. */
  blocker: Permit | undefined;
  readonly up: FakeUpstream | undefined;
  /** Calls waiting for their dispatch turn; `dispatchTurn` runs them. */
  readonly turns: DispatchTurn[];
}

function harness(
  options: {
    queued?: boolean;
    deadlineMs?: number | null;
    headers?: IncomingHttpHeaders;
    limit?: number;
    queueTimeoutMs?: number;
    observer?: CallObserver;
    queueRefusalMs?: (deadlineLeftMs: number | undefined) => number | undefined;
    callClass?: CallClass;
  } = {},
): Harness {
  const clock = fakeClock();
  const gate = new AdmissionGate(options.limit ?? 1, 2);
  const metrics = new RecordingMetrics();
  const connector = new FakeConnector();
  const openCalls = new OpenCalls();
  let releaseCalls = 0;
  let engineOpsAtRelease: string[] | undefined;
  const counted = (permit: Permit): Permit => ({
    firstToken: () => permit.firstToken(),
    release() {
      releaseCalls++;
      engineOpsAtRelease = [...(connector.opened.at(-1)?.ops ?? [])];
      permit.release();
    },
    get released() {
      return permit.released;
    },
  });
  let blocker: Permit | undefined;
  const turns: DispatchTurn[] = [];
  if (options.queued) {
    const held = gate.acquire(admitting(() => {}));
    if (held.kind !== 'admitted') throw new Error('blocker not admitted');
    blocker = held.permit;
  }
  const countingGate = {
    hasRoomFor: (cost: unknown) => gate.hasRoomFor(cost),
    get hasRoom() {
      return gate.hasRoom;
    },
    acquire(onAdmit: OnAdmit, callClass?: CallClass): Admission {
      const admission = gate.acquire(
        admitting(
          (permit) => onAdmit.onAdmitted(counted(permit)),
          () => onAdmit.onDisplaced(),
        ),
        callClass,
      );
      return admission.kind === 'admitted' ? { kind: 'admitted', permit: counted(admission.permit) } : admission;
    },
  };
  const ctx: CallContext = {
    gate: countingGate,
    upstream: connector,
    metrics,
    retryPushbackMs: () => 250,
    clock,
    scheduleDispatch: (call) => turns.push(call),
    logger: silentLogger,
    ...(options.queueTimeoutMs === undefined ? {} : { queueTimeoutMs: options.queueTimeoutMs }),
    ...(options.observer === undefined ? {} : { observer: options.observer }),
    ...(options.queueRefusalMs === undefined ? {} : { queueRefusalMs: options.queueRefusalMs }),
  };
  const down = new FakeDownstream();
  const headers: IncomingHttpHeaders = options.headers ?? { ':method': 'POST', ':path': '/pkg.Svc/Method', 'content-type': 'application/grpc', te: 'trailers' };
  const deadlineMs = options.deadlineMs === undefined ? DEADLINE_MS : options.deadlineMs;
  const call = new ProxiedCall(ctx, down, headers, deadlineMs === null ? undefined : clock.now() + deadlineMs, openCalls, undefined, options.callClass);
  const h: Harness = {
    call,
    down,
    connector,
    gate,
    metrics,
    clock,
    openCalls,
    releases: () => releaseCalls,
    engineOpsAtRelease: () => engineOpsAtRelease,
    blocker,
    turns,
    get up() {
      return connector.opened.at(-1);
    },
  };
  return h;
}

/** Events, each applied as node would deliver it; `false` when it cannot happen in this state (no engine stream yet). */
const EVENTS = {
  clientData: (h: Harness) => h.down.emit('data', Buffer.alloc(10)),
  clientEnd: (h: Harness) => h.down.emit('end'),
  clientReset: (h: Harness) => h.down.peerReset(NGHTTP2_CANCEL),
  clientResetNoError: (h: Harness) => h.down.peerReset(NGHTTP2_NO_ERROR),
  clientClose: (h: Harness) => {
    h.down.closed = h.down.destroyed = true;
    h.down.emit('close');
  },
  clientDrain: (h: Harness) => h.down.emit('drain'),
  clientWantTrailers: (h: Harness) => h.down.emit('wantTrailers'),
  admitted: (h: Harness) => {
    if (!h.blocker || h.blocker.released) return false;
    h.blocker.release();
    return true;
  },
  dispatchTurn: (h: Harness) => {
    for (const call of h.turns.splice(0)) call.onDispatchTurn();
  },
  engineResponse: (h: Harness) => h.up?.emit('response', { ':status': 200, 'content-type': 'application/grpc' }, 0) ?? false,
  engineTrailersOnly: (h: Harness) =>
    h.up?.emit('response', { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5' }, NGHTTP2_FLAG_END_STREAM) ?? false,
  engineData: (h: Harness) => h.up?.emit('data', Buffer.alloc(7)) ?? false,
  engineTrailers: (h: Harness) => h.up?.emit('trailers', { 'grpc-status': '0' }) ?? false,
  engineReset: (h: Harness) => {
    if (!h.up) return false;
    h.up.peerReset(NGHTTP2_CANCEL);
    return true;
  },
  engineClose: (h: Harness) => {
    const up = h.up;
    if (!up) return false;
    up.closed = up.destroyed = true;
    up.rstCode ??= NGHTTP2_NO_ERROR;
    return up.emit('close');
  },
  engineError: (h: Harness) => h.up?.emit('error', new Error('stream error')) ?? false,
  engineEnd: (h: Harness) => h.up?.emit('end') ?? false,
  engineDrain: (h: Harness) => h.up?.emit('drain') ?? false,
  sessionLost: (h: Harness) => {
    const up = h.up;
    if (!up) return false;
    h.connector.session.destroyed = true;
    up.emit('error', new Error('session lost'));
    up.closed = up.destroyed = true;
    return up.emit('close');
  },
  deadline: (h: Harness) => h.clock.timers.advance(DEADLINE_MS + 1),
  // The queue timeout's timer firing, in any phase (armed only while queued; a late one must change nothing).
  queueTimeout: (h: Harness) => h.call.onQueueTimeout(),
  // More urgent calls fill the queue and take this one's place; in any other phase, a late notice.
  displaced: (h: Harness) => {
    if (h.call.phase !== 'queued') return h.call.onDisplaced();
    const urgent: QueueTicket[] = [];
    for (let i = 0; i < 2 && h.call.phase === 'queued'; i++) {
      const admission = h.gate.acquire(
        admitting(() => {}),
        { priority: -1, tenant: '' },
      );
      if (admission.kind === 'queued') urgent.push(admission.ticket);
    }
    for (const ticket of urgent) ticket.cancel(); // out of the way of the invariants that follow
  },
  shutdown: (h: Harness) => h.call.shutdown(),
} satisfies Record<string, (h: Harness) => unknown>;
type EventName = keyof typeof EVENTS;
const EVENT_NAMES = Object.keys(EVENTS) as EventName[];

/** Brings a fresh call to `phase` by the ordinary route. */
function reach(phase: CallPhase): Harness {
  const h = harness({ queued: phase === 'queued' });
  h.call.start();
  if (phase === 'queued') return h;
  if (phase === 'dispatching') return h;
  EVENTS.dispatchTurn(h);
  if (phase === 'awaiting_response') return h;
  EVENTS.engineResponse(h);
  if (phase === 'streaming') return h;
  EVENTS.engineTrailers(h);
  EVENTS.engineClose(h);
  if (phase === 'ending') return h;
  EVENTS.clientWantTrailers(h);
  return h;
}

const Q = 'queued',
  D = 'dispatching',
  A = 'awaiting_response',
  S = 'streaming',
  E = 'ending',
  X = 'ended';
/** Phase after each event, from each phase. The whole (phase x event) table is written out on purpose. */
const TRANSITIONS: Record<CallPhase, Record<EventName, CallPhase>> = {
  queued: {
    clientData: Q,
    clientEnd: Q,
    clientReset: X,
    clientResetNoError: X,
    clientClose: X,
    clientDrain: Q,
    clientWantTrailers: Q,
    admitted: D,
    dispatchTurn: Q,
    engineResponse: Q,
    engineTrailersOnly: Q,
    engineData: Q,
    engineTrailers: Q,
    engineReset: Q,
    engineClose: Q,
    engineError: Q,
    engineEnd: Q,
    engineDrain: Q,
    sessionLost: Q,
    deadline: X,
    queueTimeout: X,
    displaced: X,
    shutdown: X,
  },
  dispatching: {
    clientData: D,
    clientEnd: D,
    clientReset: X,
    clientResetNoError: X,
    clientClose: X,
    clientDrain: D,
    clientWantTrailers: D,
    admitted: D,
    dispatchTurn: A,
    engineResponse: D,
    engineTrailersOnly: D,
    engineData: D,
    engineTrailers: D,
    engineReset: D,
    engineClose: D,
    engineError: D,
    engineEnd: D,
    engineDrain: D,
    sessionLost: D,
    deadline: X,
    queueTimeout: D,
    displaced: D,
    shutdown: X,
  },
  awaiting_response: {
    clientData: A,
    clientEnd: A,
    clientReset: X,
    clientResetNoError: X,
    clientClose: X,
    clientDrain: A,
    clientWantTrailers: A,
    admitted: A,
    dispatchTurn: A,
    engineResponse: S,
    engineTrailersOnly: X,
    engineData: A,
    engineTrailers: A,
    engineReset: X,
    engineClose: X,
    engineError: A,
    engineEnd: A,
    engineDrain: A,
    sessionLost: X,
    deadline: X,
    queueTimeout: A,
    displaced: A,
    shutdown: X,
  },
  streaming: {
    clientData: S,
    clientEnd: S,
    clientReset: X,
    clientResetNoError: X,
    clientClose: X,
    clientDrain: S,
    clientWantTrailers: S,
    admitted: S,
    dispatchTurn: S,
    engineResponse: S,
    engineTrailersOnly: S,
    engineData: S,
    engineTrailers: S,
    engineReset: X,
    engineClose: X,
    engineError: S,
    engineEnd: S,
    engineDrain: S,
    sessionLost: E,
    deadline: E,
    queueTimeout: S,
    displaced: S,
    shutdown: E,
  },
  ending: {
    // Our side has ended, so a client reset emits no 'aborted'; node's 'close' follows it (clientClose).
    clientData: E,
    clientEnd: E,
    clientReset: E,
    clientResetNoError: E,
    clientClose: X,
    clientDrain: E,
    clientWantTrailers: X,
    admitted: E,
    dispatchTurn: E,
    engineResponse: E,
    engineTrailersOnly: E,
    engineData: E,
    engineTrailers: E,
    engineReset: E,
    engineClose: E,
    engineError: E,
    engineEnd: E,
    engineDrain: E,
    sessionLost: E,
    deadline: X,
    queueTimeout: E,
    displaced: E,
    shutdown: E,
  },
  ended: Object.fromEntries(EVENT_NAMES.map((e) => [e, X])) as Record<EventName, CallPhase>,
};

/** The invariants that hold after every event, whatever the order. */
function checkInvariants(h: Harness): void {
  const phase = h.call.phase;
  const holdsSlot = phase === 'dispatching' || phase === 'awaiting_response' || phase === 'streaming';
  const blockerHeld = h.blocker !== undefined && !h.blocker.released ? 1 : 0;
  expect(h.gate.inEngine - blockerHeld, `slot held in ${phase}`).toBe(holdsSlot ? 1 : 0);
  expect(h.releases(), 'permit released at most once').toBeLessThanOrEqual(1);
  // The blocker never has a first token; this call awaits one only while it holds a slot.
  expect(h.gate.awaitingFirstToken - blockerHeld, `awaiting a first token in ${phase}`).toBeLessThanOrEqual(holdsSlot ? 1 : 0);
  expect(h.gate.awaitingFirstToken - blockerHeld, 'never below zero').toBeGreaterThanOrEqual(0);
  if (h.connector.opened.length > 0 && !holdsSlot) expect(h.releases(), `slot released once in ${phase}`).toBe(1);
  expect(h.metrics.ended.length, 'outcome recorded once, at the end').toBe(phase === 'ended' ? 1 : 0);
  expect(h.openCalls.list().includes(h.call), 'open-call registry').toBe(phase !== 'ended');
}

function opsOf(h: Harness): string {
  return JSON.stringify([h.down.ops, h.connector.opened.map((up) => up.ops)]);
}

describe('ProxiedCall state machine: every event in every phase', () => {
  for (const phase of Object.keys(TRANSITIONS) as CallPhase[]) {
    for (const event of EVENT_NAMES) {
      it(`${phase} + ${event} -> ${TRANSITIONS[phase][event]}`, () => {
        const h = reach(phase);
        expect(h.call.phase).toBe(phase);
        expect(() => EVENTS[event](h)).not.toThrow();
        expect(h.call.phase).toBe(TRANSITIONS[phase][event]);
        checkInvariants(h);
        if (h.call.phase === 'ended') {
          // Nothing is written to either stream once the call has ended, whatever comes next.
          const before = opsOf(h);
          for (const later of EVENT_NAMES) expect(() => EVENTS[later](h)).not.toThrow();
          expect(opsOf(h)).toBe(before);
          expect(h.metrics.ended).toHaveLength(1);
        }
      });
    }
  }
});

describe('ProxiedCall outcomes', () => {
  it('answers a call whose deadline has already passed with DEADLINE_EXCEEDED, without a slot or the engine', () => {
    for (const deadlineMs of [0, -5]) {
      const h = harness({ deadlineMs });
      h.call.start();
      expect(h.call.phase).toBe('ended');
      expect(h.down.outcome).toBe(`status ${GrpcStatus.DEADLINE_EXCEEDED}`);
      expect(h.connector.opened).toHaveLength(0);
      expect(h.gate.inEngine).toBe(0);
      expect(h.metrics.ended).toEqual([GrpcStatus.DEADLINE_EXCEEDED]);
    }
  });

  it('never dispatches a queued call whose slot comes at its deadline, before its timer ran', () => {
    const h = harness({ queued: true });
    h.call.start();
    h.clock.timers.now = DEADLINE_MS; // time has come, the timer has not fired yet
    h.blocker!.release();
    EVENTS.dispatchTurn(h);
    expect(h.connector.opened).toHaveLength(0);
    expect(h.call.phase).toBe('ended');
    expect(h.down.outcome).toBe(`status ${GrpcStatus.DEADLINE_EXCEEDED}`);
    expect(h.gate.inEngine).toBe(0);
    expect(h.releases()).toBe(1);
  });

  it('times a deadline past node timer range in steps, without ending the call early', () => {
    const deadlineMs = 720 * 3_600_000; // grpc-timeout 720H, about 30 days
    const h = harness({ deadlineMs });
    h.call.start();
    EVENTS.dispatchTurn(h);
    // The engine gets at most what a 32-bit millisecond timer holds; the sidecar times the rest.
    expect(h.up!.headers['grpc-timeout']).toBe('2147483S');
    h.clock.timers.advance(1);
    expect(h.call.phase).toBe('awaiting_response');
    h.clock.timers.advance(MAX_TIMER_MS);
    expect(h.call.phase).toBe('awaiting_response');
    h.clock.timers.advance(deadlineMs - MAX_TIMER_MS);
    expect(h.call.phase).toBe('ended');
    expect(h.down.outcome).toBe(`status ${GrpcStatus.DEADLINE_EXCEEDED}`);
  });

  it('forwards only the time left of the deadline after the wait in the queue', () => {
    const h = harness({ queued: true });
    h.call.start();
    h.clock.timers.advance(250);
    h.blocker!.release();
    h.clock.timers.advance(1);
    EVENTS.dispatchTurn(h);
    expect(h.up!.headers['grpc-timeout']).toBe('749000u');
  });

  it('drops connection-specific headers and normalises te before the engine sees them', () => {
    const h = harness({
      headers: {
        ':method': 'POST',
        ':path': '/pkg.Svc/M',
        'content-type': 'application/grpc',
        te: 'Trailers',
        connection: 'keep-alive',
        'http2-settings': 'AAMAAABkAAQAoAAAAAIAAAAA',
        'keep-alive': 'timeout=5',
        'proxy-connection': 'x',
        'transfer-encoding': 'chunked',
        upgrade: 'h2c',
        'x-keep': 'me',
      },
    });
    h.call.start();
    EVENTS.dispatchTurn(h);
    const sent = h.up!.headers;
    expect(sent.te).toBe('trailers');
    for (const name of ['connection', 'http2-settings', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']) expect(sent[name]).toBeUndefined();
    expect(sent['x-keep']).toBe('me');
  });

  it('fails only the one call, with INVALID_ARGUMENT, when the engine connection refuses its headers', () => {
    const h = harness();
    h.connector.failNext = errorWithCode('ERR_HTTP2_INVALID_CONNECTION_HEADERS', 'HTTP/1 Connection specific headers are forbidden: "x"');
    h.call.start();
    EVENTS.dispatchTurn(h);
    expect(h.down.outcome).toBe(`status ${GrpcStatus.INVALID_ARGUMENT}`);
    expect(h.gate.inEngine).toBe(0);
    expect(h.metrics.events).not.toContain('upstreamError connect');
  });

  it('answers UNAVAILABLE without the engine address when no engine stream can be opened', () => {
    const h = harness();
    h.connector.failNext = errorWithCode('ERR_HTTP2_INVALID_SESSION', 'upstream 10.1.2.3:50051 session destroyed');
    h.call.start();
    EVENTS.dispatchTurn(h);
    expect(h.down.outcome).toBe(`status ${GrpcStatus.UNAVAILABLE}`);
    expect(h.down.sentHeaders!['grpc-message']).toBe(ENGINE_UNAVAILABLE_MESSAGE);
    expect(h.gate.inEngine).toBe(0);
  });

  it('never sends the engine a call whose client reset it before its dispatch turn (Rapid Reset)', () => {
    const h = reach('dispatching');
    expect(h.gate.inEngine).toBe(1);
    EVENTS.clientReset(h);
    EVENTS.dispatchTurn(h);
    expect(h.connector.opened).toHaveLength(0);
    expect(h.gate.inEngine).toBe(0);
    expect(h.metrics.ended).toEqual([GrpcStatus.CANCELLED]);
  });

  it('answers UNAVAILABLE at once, without opening an engine stream, while the engine is known to be down', () => {
    const h = harness();
    h.connector.down = true;
    h.call.start();
    EVENTS.dispatchTurn(h);
    expect(h.connector.opened).toHaveLength(0);
    expect(h.down.outcome).toBe(`status ${GrpcStatus.UNAVAILABLE}`);
    expect(h.gate.inEngine).toBe(0);
    expect(h.metrics.events).toContain('upstreamError connect');
  });

  it('cancels the engine stream before releasing the slot, so the next call cannot reach the engine first', () => {
    for (const end of [EVENTS.clientReset, EVENTS.deadline, (h: Harness) => h.call.shutdown()]) {
      const h = reach('streaming');
      end(h);
      expect(h.engineOpsAtRelease()).toContain(`close ${NGHTTP2_CANCEL}`);
    }
  });

  it("ends the call with the engine's trailers once its data is read, while the client is still sending", () => {
    const h = reach('streaming');
    EVENTS.clientData(h);
    EVENTS.engineTrailers(h);
    EVENTS.engineEnd(h); // node emits no 'close' while our request side to the engine is open
    expect(h.call.phase).toBe('ending');
    expect(h.gate.inEngine).toBe(0);
    // Our request side is ended, not reset: the engine has answered in full.
    expect(h.up!.ops).toEqual(['write 10', 'end']);
    EVENTS.clientWantTrailers(h);
    expect(h.down.outcome).toBe('status 0');
  });

  it('never resets an engine stream that answered in full (a reset per call would trip the engine Rapid Reset limit)', () => {
    const complete = reach('ending');
    EVENTS.clientWantTrailers(complete);
    const trailersOnly = reach('awaiting_response');
    EVENTS.engineTrailersOnly(trailersOnly);
    for (const h of [complete, trailersOnly]) expect(h.up!.ops.filter((op) => op.startsWith('close'))).toEqual([]);
    expect(trailersOnly.up!.ops).toEqual(['end']); // our request side was still open: ended gracefully
  });

  it('passes an engine reset that arrives as a stream error on a live connection on as the same reset', () => {
    const h = reach('awaiting_response');
    EVENTS.clientEnd(h);
    h.up!.emit('error', errorWithCode('ERR_HTTP2_STREAM_ERROR', 'Stream closed with error code NGHTTP2_INTERNAL_ERROR'));
    h.up!.closed = h.up!.destroyed = true;
    h.up!.rstCode = constants.NGHTTP2_INTERNAL_ERROR;
    h.up!.emit('close');
    expect(h.down.outcome).toBe(`reset ${constants.NGHTTP2_INTERNAL_ERROR}`);
    expect(h.metrics.events).toContain('upstreamError reset');
  });

  it('frees the slot of a client that resets with NO_ERROR after the response headers while its request side is open', () => {
    const h = reach('streaming');
    EVENTS.clientResetNoError(h);
    expect(h.call.phase).toBe('ended');
    expect(h.gate.inEngine).toBe(0);
    expect(h.up!.ops).toContain(`close ${NGHTTP2_CANCEL}`);
    expect(h.down.destroyed).toBe(true); // a reset stream that nobody reads would otherwise never close
  });

  it('ignores the engine answer that arrives after the client reset a call it was still uploading', () => {
    const h = reach('awaiting_response');
    EVENTS.clientData(h);
    EVENTS.clientResetNoError(h);
    expect(() => EVENTS.engineResponse(h)).not.toThrow();
    expect(() => EVENTS.engineData(h)).not.toThrow();
    expect(h.down.ops).toEqual(['destroy']);
  });

  it('passes an engine reset on to the client as the same reset, even though resetting the client re-enters the call', () => {
    const h = reach('streaming');
    EVENTS.engineReset(h);
    expect(h.down.outcome).toBe(`reset ${NGHTTP2_CANCEL}`);
    expect(h.metrics.ended).toEqual([GrpcStatus.CANCELLED]);
  });

  it('ends a streaming call with UNAVAILABLE trailers on shutdown, and a queued one with Trailers-Only UNAVAILABLE', () => {
    const streaming = reach('streaming');
    streaming.call.shutdown();
    EVENTS.clientWantTrailers(streaming);
    expect(streaming.down.outcome).toBe(`status ${GrpcStatus.UNAVAILABLE}`);
    const queued = reach('queued');
    queued.call.shutdown();
    expect(queued.down.outcome).toBe(`status ${GrpcStatus.UNAVAILABLE}`);
    expect(queued.gate.queued).toBe(0);
  });

  it('ends with the engine trailers once the client side drained, after freeing the slot when the engine finished', () => {
    const h = reach('ending');
    expect(h.gate.inEngine).toBe(0);
    EVENTS.clientWantTrailers(h);
    expect(h.down.outcome).toBe('status 0');
    expect(h.metrics.ended).toEqual([GrpcStatus.OK]);
  });

  it('rejects with the prebuilt RESOURCE_EXHAUSTED answer when engine and queue are full', () => {
    const gateHolder = harness({ queued: true });
    gateHolder.gate.acquire(admitting(() => {}));
    gateHolder.gate.acquire(admitting(() => {})); // queue of 2 now full
    gateHolder.call.start();
    expect(gateHolder.down.outcome).toBe(`status ${GrpcStatus.RESOURCE_EXHAUSTED}`);
    expect(gateHolder.metrics.events).toContain('rejected');
    expect(gateHolder.openCalls.size).toBe(0);
  });
});

describe('ProxiedCall: displaced from a full queue', () => {
  it('answers like a full worker with the pushback, counted as displaced for its class, and its timers never fire', () => {
    const rejected: string[] = [];
    const batch: CallClass = { priority: 5, tenant: 'nightly' };
    const h = harness({
      queued: true,
      queueTimeoutMs: 300,
      callClass: batch,
      observer: { rejected: (reason) => rejected.push(reason), dispatched: () => undefined },
    });
    h.call.start();
    expect(h.call.phase).toBe('queued');
    const urgent = [0, 1].map(() =>
      h.gate.acquire(
        admitting(() => {}),
        { priority: 0, tenant: 'chat' },
      ),
    );
    expect(urgent.map((a) => a.kind)).toEqual(['queued', 'queued']);
    expect(h.call.phase).toBe('ended');
    expect(h.down.outcome).toBe(`status ${GrpcStatus.RESOURCE_EXHAUSTED}`);
    expect(h.down.sentHeaders!['grpc-message']).toBe('Server overloaded: worker at capacity');
    expect(h.down.sentHeaders!['grpc-retry-pushback-ms']).toBe('250');
    expect(h.metrics.events).toEqual(['rejected displaced']);
    expect(h.metrics.rejectedClasses).toEqual([batch]);
    expect(rejected).toEqual(['displaced']);
    expect(h.gate.queued).toBe(2);
    // Its queue timeout and deadline pass: nothing more is sent or counted.
    h.clock.timers.advance(DEADLINE_MS + 1);
    expect(h.metrics.events).toEqual(['rejected displaced']);
    expect(h.down.outcome).toBe(`status ${GrpcStatus.RESOURCE_EXHAUSTED}`);
    h.blocker!.release();
    EVENTS.dispatchTurn(h);
    expect(h.connector.opened).toHaveLength(0);
  });

  it('counts the class of a call that reaches a slot', () => {
    const h = harness({ callClass: { priority: -2, tenant: 'chat' } });
    h.call.start();
    expect(h.metrics.admittedClasses).toEqual([{ priority: -2, tenant: 'chat' }]);
  });
});

describe('ProxiedCall: the queue timeout', () => {
  const QUEUE_TIMEOUT_MS = 300;

  it('answers a call queued past the queue timeout like a full worker: RESOURCE_EXHAUSTED with the pushback, counted as queue_timeout', () => {
    const rejected: string[] = [];
    const h = harness({
      queued: true,
      queueTimeoutMs: QUEUE_TIMEOUT_MS,
      observer: { rejected: (reason) => rejected.push(`observer ${reason}`), dispatched: () => undefined },
    });
    h.call.start();
    h.clock.timers.advance(QUEUE_TIMEOUT_MS - 1);
    expect(h.call.phase).toBe('queued');
    h.clock.timers.advance(1);
    expect(h.call.phase).toBe('ended');
    expect(h.down.outcome).toBe(`status ${GrpcStatus.RESOURCE_EXHAUSTED}`);
    expect(h.down.sentHeaders!['grpc-message']).toBe('Server overloaded: worker at capacity');
    expect(h.down.sentHeaders!['grpc-retry-pushback-ms']).toBe('250');
    expect(h.metrics.events).toEqual(['rejected queue_timeout']);
    expect(rejected).toEqual(['observer queue_timeout']);
    expect(h.gate.queued).toBe(0);
    // The slot that frees later goes to nobody: the call never reaches the engine.
    h.blocker!.release();
    EVENTS.dispatchTurn(h);
    expect(h.connector.opened).toHaveLength(0);
    expect(h.gate.inEngine).toBe(0);
  });

  it('lets a shorter deadline win: DEADLINE_EXCEEDED, no queue timer armed', () => {
    const h = harness({ queued: true, queueTimeoutMs: DEADLINE_MS + 500 });
    h.call.start();
    expect(h.clock.timers.active).toBe(1); // the deadline only
    h.clock.timers.advance(DEADLINE_MS);
    expect(h.down.outcome).toBe(`status ${GrpcStatus.DEADLINE_EXCEEDED}`);
    expect(h.metrics.events).toEqual(['deadlineWhileQueued']);
  });

  it('times a call without a deadline too, so it cannot wait for ever', () => {
    const h = harness({ queued: true, deadlineMs: null, queueTimeoutMs: QUEUE_TIMEOUT_MS });
    h.call.start();
    h.clock.timers.advance(QUEUE_TIMEOUT_MS);
    expect(h.down.outcome).toBe(`status ${GrpcStatus.RESOURCE_EXHAUSTED}`);
  });

  it('disarms the timer when the call reaches a slot in time, and arms none for an admitted call or a timeout of 0', () => {
    const h = harness({ queued: true, queueTimeoutMs: QUEUE_TIMEOUT_MS });
    h.call.start();
    h.clock.timers.advance(QUEUE_TIMEOUT_MS - 1);
    h.blocker!.release();
    expect(h.clock.timers.active).toBe(1); // the deadline only
    h.clock.timers.advance(QUEUE_TIMEOUT_MS);
    EVENTS.dispatchTurn(h);
    expect(h.call.phase).toBe('awaiting_response');
    const admitted = harness({ queueTimeoutMs: QUEUE_TIMEOUT_MS });
    admitted.call.start();
    expect(admitted.clock.timers.active).toBe(1);
    const off = harness({ queued: true, queueTimeoutMs: 0 });
    off.call.start();
    expect(off.clock.timers.active).toBe(1);
  });

  it('clears the timer when a queued call ends otherwise (client gone, shutdown)', () => {
    for (const end of [EVENTS.clientReset, (h: Harness) => h.call.shutdown()]) {
      const h = harness({ queued: true, deadlineMs: null, queueTimeoutMs: QUEUE_TIMEOUT_MS });
      h.call.start();
      end(h);
      expect(h.clock.timers.active).toBe(0);
    }
  });

  it('reports how long each call held its slot, from admission (the queue wait excluded) to release', () => {
    const held: number[] = [];
    const observer: CallObserver = { rejected: () => {}, dispatched: () => undefined, slotReleased: (ms) => held.push(ms) };
    const h = harness({ queued: true, observer });
    h.call.start();
    h.clock.timers.advance(100); // queued: not counted
    h.blocker!.release();
    EVENTS.dispatchTurn(h);
    h.clock.timers.advance(40);
    EVENTS.engineResponse(h);
    EVENTS.engineTrailers(h);
    EVENTS.engineClose(h);
    expect(held).toEqual([40]);
  });
});

describe('ProxiedCall: refusal by expected wait (--max-queue-wait-ms)', () => {
  it('refuses a call that would queue at once, with the expected wait as its pushback, counted as expected_wait, and asks with the deadline left', () => {
    const asked: (number | undefined)[] = [];
    const h = harness({ queued: true, queueRefusalMs: (left) => (asked.push(left), 1234) });
    h.call.start();
    expect(h.call.phase).toBe('ended');
    expect(h.down.outcome).toBe(`status ${GrpcStatus.RESOURCE_EXHAUSTED}`);
    expect(h.down.sentHeaders!['grpc-retry-pushback-ms']).toBe('1234');
    expect(h.metrics.events).toEqual(['rejected expected_wait']);
    expect(asked).toEqual([DEADLINE_MS]);
    expect([h.gate.queued, h.gate.inEngine]).toEqual([0, 1]); // only the blocker
  });

  it('queues the call when the expected wait fits, and never asks when there is room', () => {
    let asked = 0;
    const fits = harness({ queued: true, queueRefusalMs: () => (asked++, undefined) });
    fits.call.start();
    expect(fits.call.phase).toBe('queued');
    const room = harness({ queueRefusalMs: () => (asked++, 1) });
    room.call.start();
    expect(room.call.phase).not.toBe('ended');
    expect(asked).toBe(1);
  });
});

describe('ProxiedCall: the first token', () => {
  it("frees the call's place under the first-token limit at the engine's first message, and reports the time from the slot", () => {
    const firsts: number[] = [];
    const observer: CallObserver = { rejected: () => {}, dispatched: () => undefined, firstToken: (ms) => firsts.push(ms) };
    const h = harness({ observer });
    h.call.start();
    EVENTS.dispatchTurn(h);
    h.clock.timers.advance(25);
    EVENTS.engineResponse(h);
    expect(h.gate.awaitingFirstToken, 'headers alone are no token').toBe(1);
    EVENTS.engineData(h);
    EVENTS.engineData(h);
    expect(h.gate.awaitingFirstToken).toBe(0);
    expect(h.gate.inEngine).toBe(1);
    expect(firsts).toEqual([25]);
  });
});

describe('ProxiedCall under random event orders (seeded)', () => {
  it('keeps every invariant over 3,000 random sequences', () => {
    const random = mulberry32(20261202);
    const pick = (): EventName => EVENT_NAMES[Math.floor(random() * EVENT_NAMES.length)]!;
    for (let run = 0; run < 3000; run++) {
      const h = harness({ queued: random() < 0.3 });
      h.call.start();
      const steps = 1 + Math.floor(random() * 14);
      const trail: string[] = [];
      let endedOps: string | undefined;
      for (let step = 0; step < steps; step++) {
        const event = pick();
        trail.push(event);
        if (random() < 0.2) h.down.writeReturns = !h.down.writeReturns;
        try {
          EVENTS[event](h);
          checkInvariants(h);
          if (endedOps !== undefined) expect(opsOf(h), 'no write after the end').toBe(endedOps);
          if (h.call.phase === 'ended') endedOps ??= opsOf(h);
        } catch (err) {
          throw new Error(`run ${run}, events ${trail.join(' ')}: ${(err as Error).message}`);
        }
      }
    }
  });

  it('only ever moves a call forward along NEXT_PHASES, over 1,000 random sequences', () => {
    const random = mulberry32(20261204);
    const forward = (from: CallPhase, to: CallPhase, seen = new Set<CallPhase>()): boolean =>
      NEXT_PHASES[from].some((next) => next === to || (!seen.has(next) && (seen.add(next), forward(next, to, seen))));
    for (let run = 0; run < 1000; run++) {
      const h = harness({ queued: random() < 0.3 });
      let phase = h.call.phase;
      h.call.start();
      const trail: string[] = [];
      for (let step = 0; step < 12; step++) {
        const event = EVENT_NAMES[Math.floor(random() * EVENT_NAMES.length)]!;
        EVENTS[event](h);
        trail.push(`${event}->${h.call.phase}`);
        if (h.call.phase !== phase) expect(forward(phase, h.call.phase), `run ${run}: ${trail.join(' ')}`).toBe(true);
        phase = h.call.phase;
      }
    }
  });
});
