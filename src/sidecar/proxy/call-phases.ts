/**
 * The phases of a proxied call (proxied-call.ts), and the two tables that make it a state machine.
 *
 *   queued ─admitted─► dispatching ─turn─► awaiting_response ─engine headers─► streaming ─engine done─► ending ─trailers─► ended
 *     │                                         │ Trailers-Only from the engine ─────────────────────────────────────────►│
 *     └── rejected, expired, cancelled, deadline, shutdown: the sidecar's own answer or a reset ────────────────────────►│
 *
 *   queued             waiting for an engine slot (holds a queue ticket); nothing sent upstream yet;
 *                      past the queue timeout, or displaced from a full queue by a more urgent call,
 *                      it is refused like a full worker (RESOURCE_EXHAUSTED)
 *   dispatching        holds a slot; waits for its dispatch turn: at once, or, on a connection that
 *                      resets calls early, at the end of the current I/O read, so a reset that came
 *                      in the same read (Rapid Reset) is seen first and the engine never hears of it
 *   awaiting_response  holds a slot; request forwarded, no response headers yet
 *   streaming          holds a slot; response headers sent to the client, bytes flowing both ways
 *   ending             the engine is done (slot released); the client's side drains, then gets trailers
 *   ended              terminal: every later event is ignored
 *
 * NEXT_PHASES lists the transitions; a call changes phase only through it. ACTS_IN lists, for
 * every event (client data/end/reset/close, engine response/data/trailers/reset/close/error,
 * flow-control drains, deadline, queue timeout, displacement, shutdown), the phases in which it acts; in every
 * other phase the event is ignored (a permit that arrives late is given back).
 */
import type { CallEvents } from './call-listeners.js';

export type CallPhase = 'queued' | 'dispatching' | 'awaiting_response' | 'streaming' | 'ending' | 'ended';

/** The only phase changes there are (the picture above). */
export const NEXT_PHASES: Readonly<Record<CallPhase, readonly CallPhase[]>> = {
  queued: ['dispatching', 'ended'],
  dispatching: ['awaiting_response', 'ended'],
  awaiting_response: ['streaming', 'ending', 'ended'],
  streaming: ['ending', 'ended'],
  ending: ['ended'],
  ended: [],
};

const IN_ENGINE: readonly CallPhase[] = ['awaiting_response', 'streaming'];
/** No response headers went to the client yet: a client reset here may count as an early one. */
export const BEFORE_RESPONSE: readonly CallPhase[] = ['queued', 'dispatching', 'awaiting_response'];
const LIVE: readonly CallPhase[] = ['queued', 'dispatching', 'awaiting_response', 'streaming', 'ending'];

/** Where each event acts; everywhere else it is ignored. */
export const ACTS_IN: Readonly<Record<keyof CallEvents | 'onDispatchTurn' | 'onDisplaced' | 'shutdown', readonly CallPhase[]>> = {
  onAdmitted: ['queued'], // the ticket is cancelled whenever a call leaves the queue; a late permit is given back
  onDisplaced: ['queued'], // only a queued call has a place to lose
  onDispatchTurn: ['dispatching'],
  onDeadline: LIVE,
  onQueueTimeout: ['queued'], // admitted in time: the timer was cleared, a late one changes nothing
  shutdown: ['queued', 'dispatching', ...IN_ENGINE], // 'ending': the answer is complete; the connection's close delivers or cuts it
  onClientGone: LIVE,
  onClientData: IN_ENGINE, // not read before dispatch; once the engine has answered, the rest is discarded
  onClientEnd: IN_ENGINE,
  onClientDrain: ['streaming'],
  onClientWantTrailers: ['ending'], // end() is called only on entering 'ending'
  onEngineResponse: ['awaiting_response'], // informational or repeated headers are not a new response
  onEngineData: ['streaming'], // no 'data' listener before the response headers
  onEngineTrailers: IN_ENGINE,
  onEngineError: IN_ENGINE,
  onEngineAborted: IN_ENGINE,
  onEngineEnd: IN_ENGINE,
  onEngineClosed: IN_ENGINE,
  onEngineDrain: IN_ENGINE,
};

/** A call that the ingress can cut when the drain grace period ends. */
export interface OpenCall {
  readonly phase: CallPhase;
  shutdown(): void;
}

export type CallEvent = keyof typeof ACTS_IN;

export function actsIn(event: CallEvent, phase: CallPhase): boolean {
  return ACTS_IN[event].includes(phase);
}

export function isTransition(from: CallPhase, to: CallPhase): boolean {
  return NEXT_PHASES[from].includes(to);
}
